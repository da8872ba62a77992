"""The aten handler table and its extension API: :func:`on` registers a handler per overload.

A handler translates one traced aten call into IR ops. It receives the :class:`Builder` (the
capture converter), the call's arguments bound by name (tensors already resolved to IR value
names) and the fx node (for ``node.meta["val"]``, what torch computed), and returns the IR
value name of the result, a tuple of them, a :class:`Deferred` or an :class:`Unavailable`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import fx
from torch.overrides import TorchFunctionMode

from ..types import TensorType

__all__ = ["DECOMPOSED", "HANDLERS", "Builder", "Deferred", "Handler", "Unavailable", "decompose",
           "decompose_as", "decomposition_table", "function_replacements", "on", "replace_function"]


class Builder(Protocol):
    """What a handler may do while capture translates a call (the converter implements it)."""

    def emit(self, op: str, operands: list[str], **attrs: Any) -> str:
        """Append an IR node ``op(operands, attrs)`` and return its value name."""
        ...

    def type(self, name: str) -> TensorType:
        """Return the type of an IR value."""
        ...

    def constant(self, tensor: torch.Tensor, fallback: str) -> str:
        """Hold ``tensor`` as a graph constant (named after ``fallback`` if nothing better)."""
        ...

    def write_state(self, node: fx.Node, target: Any, current: str, value: str) -> None:
        """Store ``value`` into ``target`` (an fx argument of ``node``, now IR value
        ``current``): an in-place write the op's schema does not declare, such as batch norm's
        running statistics. ``value`` is cast and broadcast to ``current``'s type."""
        ...


Handler = Callable[[Builder, dict[str, Any], fx.Node], Any]
"""``handler(builder, args, node) -> result``: see the module docstring."""

HANDLERS: dict[str, Handler] = {}
"""Handlers by aten overload name (``str(torch.ops.aten.add.Tensor)``)."""


def on(*names: str, namespace: str = "aten") -> Callable[[Handler], Handler]:
    """Register the decorated handler for each aten overload, e.g. ``@on("add.Tensor")``.

    Parameters
    ----------
    *names : str
        Overload names without the ``aten.`` prefix (``"sum.dim_IntList"``).
    namespace : str
        The operator library: ``"aten"``, or another one's custom op (``torch.library``), such
        as transformers' ``"transformers"`` (``transformers.grouped_mm_fallback.default``).

    Raises
    ------
    ValueError
        When an overload already has a handler (two files translating one op).
    """

    def register(handler: Handler) -> Handler:
        for name in names:
            key = f"{namespace}.{name}"
            if key in HANDLERS:
                raise ValueError(f"{key} already has a handler ({HANDLERS[key].__module__}); "
                                 "an aten overload is translated in one place")
            HANDLERS[key] = handler
        return handler

    return register


DECOMPOSED: set[str] = set()
"""Aten overloads captured through torch's own decomposition (torch.export's default table)
into ops that have handlers, instead of a handler of their own."""


@functools.cache
def _torch_decompositions() -> dict[str, tuple[Any, Callable[..., Any]]]:
    table = torch.export.default_decompositions()
    return {str(op): (op, table[op]) for op in table}


def decompose(*names: str) -> None:
    """Capture each aten overload (``"mv.default"``) through torch's decomposition of it.

    Raises
    ------
    ValueError
        When torch has no decomposition of the overload, or it already has a handler.
    """
    for name in names:
        key = f"aten.{name}"
        if key in HANDLERS:
            raise ValueError(f"{key} has a handler ({HANDLERS[key].__module__}); an aten "
                             "overload is translated in one place")
        if key not in _torch_decompositions():
            raise ValueError(f"torch has no decomposition of {key}")
        DECOMPOSED.add(key)


_OWN: dict[str, tuple[Any, Callable[..., Any]]] = {}


def decompose_as(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Capture an aten overload (``"reflection_pad2d.default"``) through the decorated
    function, a decomposition of the kit's own in torch ops that have handlers, for an op
    torch decomposes into ops the IR has not (or does not decompose at all).

    Raises
    ------
    ValueError
        When the overload already has a handler or a decomposition.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = f"aten.{name}"
        if key in HANDLERS or key in DECOMPOSED:
            raise ValueError(f"{key} is already translated; an aten overload is translated "
                             "in one place")
        op, overload = name.split(".")
        _OWN[key] = (getattr(getattr(torch.ops.aten, op), overload), fn)
        DECOMPOSED.add(key)
        return fn

    return register


def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """The decompositions capture traces with: torch's own for :data:`DECOMPOSED`, or the
    kit's own (:func:`decompose_as`)."""
    table = {**_torch_decompositions(), **_OWN}
    return dict(table[key] for key in sorted(DECOMPOSED))


#: torch function -> the kit's replacement, traced instead of it (:func:`replace_function`).
_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}


def replace_function(function: Callable[..., Any]
                     ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Trace the decorated function in place of the torch function ``function``
    (``torch.nn.functional.one_hot``), for an op whose aten kernel is composite (so no aten
    decomposition can reach it) and reads tensor values a trace cannot.

    Raises
    ------
    ValueError
        When ``function`` already has a replacement.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if function in _FUNCTIONS:
            raise ValueError(f"{function} already has a replacement")
        _FUNCTIONS[function] = fn
        return fn

    return register


class _Replacements(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        # Inside, this mode is off: the replacement's own torch calls are traced as usual.
        return _FUNCTIONS.get(func, func)(*args, **(kwargs or {}))


@contextlib.contextmanager
def function_replacements() -> Iterator[None]:
    """While tracing: each torch function of :func:`replace_function` runs its replacement."""
    with _Replacements():
        yield


@dataclass(frozen=True)
class Unavailable:
    """A traced value the IR cannot hold; using it is an error, leaving it unused is not.

    Parameters
    ----------
    reason : str
        The error message if something reads the value.
    """

    reason: str


class Deferred:
    """A traced value emitted only if something reads it (so that an unread one leaves no
    trace in the graph): ``value()`` emits it the first time and returns its name.

    Parameters
    ----------
    emit : callable
        ``emit() -> str``: emits the value's nodes and returns its IR value name.
    """

    def __init__(self, emit: Callable[[], str]):
        self._emit: Callable[[], str] | None = emit
        self._name = ""

    def value(self) -> str:
        """Emit the value (the first time only) and return its IR value name."""
        if self._emit is not None:
            self._name, self._emit = self._emit(), None
        return self._name
