"""Functionalisation of a traced training step: in-place updates become SSA values and state writes.

A training step traced by ``make_fx`` (forward, ``loss.backward()``, ``optimizer.step()``)
updates tensors in place: the optimizer's ``param.add_(...)`` and ``buf.mul_(...)`` act on the
parameters and momentum buffers, which the trace holds as constants (``get_attr``). The IR is
SSA, so capture tracks, for every *storage* (a constant, a graph input, or a value an op
created), the IR value it holds now:

- an op that writes an argument (``mul_``, ``add_``, ``copy_``, ``zero_``, ``maximum.out``, ...)
  is translated by the handler of its functional form, and its result becomes the new value of
  that argument's storage; the op's own result is that storage again;
- an op that returns an alias (``t``, ``view``, ``expand``, ``detach``) is a view of its
  argument's storage; reading a view after its storage was updated is an error (the IR would
  compute it from the old value); an alias the handler left unchanged (``detach``) is the
  storage itself;
- at the end, every constant whose value changed becomes a *state write*: its registered name
  -> the IR value to store into its device buffer after the program ran.

(:mod:`mncore_compiler.step_state` finds what a step touches and snapshots it.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import fx

from .aten.strided import reshape_view_of
from .errors import CaptureError, UnsupportedOperationError

__all__ = ["Functionalizer", "reshapes_in_place", "undo_view"]

#: Ops whose result is a fresh random tensor: a traced Dropout in train() mode, torch.rand.
RANDOM_OPS = ("native_dropout", "bernoulli", "rand", "randn", "randint", "normal", "uniform",
              "dropout", "multinomial", "randperm", "exponential")


# -- aliasing during conversion -----------------------------------------------------------------


def mutated_args(target: Any) -> list[str]:
    """Names of the arguments an aten op writes (``self`` of ``add_``, ``out`` of ``.out``)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return []
    return [a.name for a in schema.arguments
            if a.alias_info is not None and a.alias_info.is_write]


def returns_alias(target: Any) -> bool:
    """True for an op whose result aliases an argument without writing it (a view)."""
    schema = getattr(target, "_schema", None)
    if schema is None or len(schema.returns) != 1:
        return False
    info = schema.returns[0].alias_info
    return info is not None and not info.is_write


#: In-place overloads whose functional form has another overload name.
_FUNCTIONAL_OVERLOADS = {"aten.transpose_.default": "aten.transpose.int"}


def functional_name(key: str) -> str:
    """The overload whose handler computes what an in-place or ``out=`` op writes:
    ``aten.mul_.Tensor`` -> ``aten.mul.Tensor``, ``aten.maximum.out`` ->
    ``aten.maximum.default``."""
    if key in _FUNCTIONAL_OVERLOADS:
        return _FUNCTIONAL_OVERLOADS[key]
    _, op, overload = key.split(".", 2)
    if overload == "out":
        return f"aten.{op}.default"
    return f"aten.{op.removesuffix('_')}.{overload}"


def reshapes_in_place(key: str) -> bool:
    """True for an in-place op that gives its tensor the shape of a view (``squeeze_``,
    ``unsqueeze_``, ``t_``, ``transpose_``: what ``v @ W`` with a 1-D ``v`` traces to): its
    functional overload returns an alias, and the tensor takes that value's shape."""
    _, op, overload = functional_name(key).split(".", 2)
    functional = getattr(getattr(torch.ops.aten, op, None), overload, None)
    return functional is not None and returns_alias(functional)


#: Views of a whole tensor, by how a new value of the view maps back onto the tensor.
_RESHAPE_VIEWS = frozenset(f"aten.{name}" for name in (
    "view.default", "_unsafe_view.default", "reshape.default", "_reshape_alias.default",
    "squeeze.default", "squeeze.dim", "squeeze.dims", "unsqueeze.default",
    "flatten.using_ints", "alias.default", "detach.default"))
_PERMUTE_VIEWS = frozenset(("aten.t.default", "aten.transpose.int", "aten.permute.default"))


def undo_view(view: fx.Node) -> tuple[str, dict[str, Any]] | None:
    """The IR op ``(name, attrs)`` that maps a new value of ``view`` back onto the tensor it
    views, for a view of all of it (a reshape or a permute of its axes); None for others."""
    source = view.args[0]
    if not isinstance(source, fx.Node) or not isinstance(source.meta.get("val"), torch.Tensor):
        return None
    shape = tuple(source.meta["val"].shape)
    rank = len(shape)
    key = str(view.target)
    if key in _RESHAPE_VIEWS or reshape_view_of(view) is not None:
        return "reshape", {"shape": shape}
    if key not in _PERMUTE_VIEWS:
        return None
    dims = list(range(rank))
    if key == "aten.permute.default":
        dims = [d % rank for d in cast(Sequence[int], view.args[1])]
    elif rank >= 2:
        d0, d1 = (0, 1) if key == "aten.t.default" else (
            cast(int, view.args[1]) % rank, cast(int, view.args[2]) % rank)
        dims[d0], dims[d1] = dims[d1], dims[d0]
    inverse = tuple(sorted(range(rank), key=dims.__getitem__))
    return "permute", {"dims": inverse}


class Functionalizer:
    """The storage behind each traced value and the IR value each storage holds now.

    ``storage`` maps an fx node that *is* a storage (a constant's ``get_attr``, an input, an
    op's fresh result, an in-place op's result, an unchanged alias) to its key; ``views`` maps a
    view to (its storage, that storage's version when the view was made).
    """

    def __init__(self, undo: Callable[[fx.Node, str], str | None] | None = None) -> None:
        #: ``undo(view, value)``: ``value`` (a new value of ``view``) as a new value of the
        #: tensor ``view`` was taken from, or None when that view cannot be written through.
        self.undo = undo
        self.storage: dict[fx.Node, object] = {}
        self.views: dict[fx.Node, tuple[object, int]] = {}
        #: View -> the view ops from its storage to it, outermost first.
        self.chains: dict[fx.Node, tuple[fx.Node, ...]] = {}
        self.current: dict[object, str] = {}
        self.version: dict[object, int] = {}
        #: Storage key -> constant name, for constant storages.
        self.constants: dict[object, str] = {}
        #: Storage key -> graph input name, for input storages.
        self.inputs: dict[object, str] = {}

    def define(self, node: fx.Node, value: Any, key: object | None = None) -> None:
        """``node`` is a storage holding ``value`` (its own, or ``key``'s when given)."""
        if not isinstance(value, str):
            return
        key = node if key is None else key
        self.storage[node] = key
        self.current.setdefault(key, value)
        self.version.setdefault(key, 0)

    def base(self, node: fx.Node) -> tuple[object, int] | None:
        if node in self.storage:
            key = self.storage[node]
            return key, self.version[key]
        return self.views.get(node)

    def read(self, node: fx.Node, values: Mapping[fx.Node, Any]) -> Any:
        """The IR value ``node`` stands for at this point of the trace."""
        if node in self.storage:
            return self.current[self.storage[node]]
        view = self.views.get(node)
        if view is not None and self.version[view[0]] != view[1]:
            raise UnsupportedOperationError(
                f"{node.name} ({node.target}) is a view of a tensor that was updated in place "
                "after the view was taken; the MN-Core compiler cannot read such a view. "
                "Take the view after the update (or clone() it before)"
            )
        return values[node]

    def alias(self, node: fx.Node, source: fx.Node, result: Any, source_value: Any) -> None:
        """``node`` (a view op's result) aliases ``source``."""
        if not isinstance(source, fx.Node):
            self.define(node, result)
        elif source in self.storage and result == source_value:
            # Unchanged (detach, a same-shape view): the storage itself.
            self.storage[node] = self.storage[source]
        else:
            base = self.base(source)
            if base is None:
                self.define(node, result)
            else:
                self.views[node] = base
                self.chains[node] = (*self.chains.get(source, ()), node)

    def write(self, node: fx.Node, target: Any, new: str, *, same_storage: bool = True) -> None:
        """``node`` wrote ``new`` into argument ``target``; ``node`` is that storage now, unless
        ``same_storage`` is False (an op whose results are fresh tensors, and whose write its
        schema does not declare: ``native_batch_norm``'s running statistics).

        A ``target`` that is a whole-tensor view (a reshape or a transpose of its tensor, as
        the ``.grad`` of a Linear weight is, which a second ``backward()`` accumulates into)
        is written through: its tensor takes ``new`` undone view by view, and ``node`` is the
        same view of the updated tensor."""
        if same_storage and isinstance(target, fx.Node) and target in self.views:
            key = self.views[target][0]
            chain = self.chains.get(target, ())
            new = self._write_through(node, chain, new)
            self._store(node, key, new)
            self.views[node] = (key, self.version[key])
            self.chains[node] = chain
            return
        if not isinstance(target, fx.Node) or target not in self.storage:
            raise UnsupportedOperationError(
                f"{node.target} updates a view of a tensor in place; the MN-Core compiler "
                "supports in-place updates of whole tensors only"
            )
        key = self.storage[target]
        self._store(node, key, new)
        if same_storage:
            self.storage[node] = key

    def _write_through(self, node: fx.Node, chain: tuple[fx.Node, ...], new: str) -> str:
        for view in reversed(chain):
            undone = self.undo(view, new) if self.undo is not None else None
            if undone is None:
                raise UnsupportedOperationError(
                    f"{node.target} updates an {view.target} view of a tensor in place; the "
                    "MN-Core compiler writes in place through whole-tensor views (reshapes, "
                    "transposes, permutes), slices, selects and as_strided views of distinct "
                    "elements of a dense tensor only: update the tensor itself, or a clone()")
            new = undone
        return new

    def _store(self, node: fx.Node, key: object, new: str) -> None:
        if key in self.inputs:
            raise CaptureError(
                f"the function updates its input {self.inputs[key]!r} in place "
                f"({node.target}); a compiled function cannot change its caller's tensors: "
                "work on a copy (x = x.clone())"
            )
        self.current[key] = new
        self.version[key] += 1

    def written_constants(self) -> dict[str, str]:
        """Constant name -> its final IR value, for each constant whose value changed."""
        return {name: self.current[key] for key, name in self.constants.items()
                if self.current[key] != name}
