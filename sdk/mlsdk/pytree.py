"""Pytree signatures: compile and call functions over tuples, lists, dicts, NamedTuples and
dataclasses of tensors (``Context.compile_automap``).

The structures are flattened with torch's own pytree utilities (``torch.utils._pytree``) into
the ordinary dict calling convention, one IO per tensor leaf, named after the leaf's key path
(``args.0.x``, ``kwargs.scale``, ``out.1``), and compiled by :meth:`mlsdk.Context.compile`:
there is one compile and one call mechanism, this module only maps structures onto it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch
import torch.utils._pytree as pytree

from .errors import InputError, MLSDKError
from .iospec import IOSpec
from .proxy import TensorProxy

if TYPE_CHECKING:
    from .compiled import CompiledFunction
    from .storage import StoragePath

__all__ = ["AutomapFunction", "PytreeStructureError", "compile_automap",
           "register_pytree_dataclass", "register_pytree_namedtuple"]

T = TypeVar("T", bound=type)

#: Leaf types taken as compile-time constants: baked into the program, checked at each call.
CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None))

_ROOTS = ("args", "kwargs")
_MISSING = object()


class PytreeStructureError(InputError):
    """A call whose arguments are structured unlike the ones the function was compiled with."""


# -- registration -----------------------------------------------------------------------------


def register_pytree_namedtuple(cls: T) -> T:
    """Class decorator: declare a NamedTuple a pytree node (its fields are its children).

    torch's pytree already treats every NamedTuple as a node, so this only checks that
    ``cls`` is one; it exists so that MLSDK programs, which register their NamedTuples, run
    unchanged. Returns ``cls``.

    Raises
    ------
    TypeError
        When ``cls`` is not a NamedTuple class.
    """
    if not (isinstance(cls, type) and pytree.is_namedtuple_class(cls)):
        raise TypeError("register_pytree_namedtuple() takes a NamedTuple class, not "
                        f"{_describe(cls)}")
    return cls


def register_pytree_dataclass(cls: T) -> T:
    """Class decorator: make a dataclass a pytree node whose children are its fields.

    Registers ``cls`` with torch's pytree (``torch.utils._pytree.register_dataclass``): the
    fields that ``__init__`` takes are the children, a field holding None is part of the
    structure. Registering a class twice does nothing. Returns ``cls``.

    Raises
    ------
    TypeError
        When ``cls`` is not a dataclass class.

    Examples
    --------
    >>> @register_pytree_dataclass
    ... @dataclasses.dataclass
    ... class Pair:
    ...     left: torch.Tensor
    ...     right: torch.Tensor
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError("register_pytree_dataclass() takes a dataclass class (decorate it "
                        f"with @dataclasses.dataclass first), not {_describe(cls)}")
    if cls not in pytree.SUPPORTED_NODES:
        pytree.register_dataclass(cls)
    return cls


# -- signatures -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Leaf:
    """One leaf of a compiled structure: a tensor IO (``tensor``) or a constant (``value``)."""

    name: str
    path: pytree.KeyPath
    tensor: bool
    value: Any = None
    #: The type of every container on the way from the root down to the leaf.
    containers: tuple[type, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Signature:
    """The structure of a tree: torch's TreeSpec and a named record of each leaf."""

    spec: pytree.TreeSpec
    leaves: tuple[_Leaf, ...]

    @classmethod
    def of(cls, tree: Any, what: str, roots: tuple[str, ...] | None) -> tuple[_Signature,
                                                                           list[Any]]:
        """Flatten ``tree``; return its signature and its leaves (tensors kept out of it)."""
        flat, spec = pytree.tree_flatten_with_path(tree)
        leaves: list[_Leaf] = []
        values: list[Any] = []
        seen: dict[str, pytree.KeyPath] = {}
        for path, value in flat:
            name = _path_name(path, roots)
            if name in seen:
                raise ValueError(
                    f"{what}s {_path_repr(seen[name], roots)} and {_path_repr(path, roots)} "
                    f"would both be named {name!r}; rename the dict key that contains a '.'")
            seen[name] = path
            tensor = _is_tensor_leaf(name, value, what)
            containers = tuple(type(pytree.key_get(tree, path[:depth]))
                               for depth in range(len(path)))
            leaves.append(_Leaf(name, path, tensor, None if tensor else value, containers))
            values.append(value)
        return cls(spec, tuple(leaves)), values

    @property
    def tensors(self) -> list[str]:
        return [leaf.name for leaf in self.leaves if leaf.tensor]

    def rebuild(self, tensors: Mapping[str, Any]) -> Any:
        """The tree with ``tensors[name]`` at each tensor leaf and the constants in place."""
        values = [tensors[leaf.name] if leaf.tensor else leaf.value for leaf in self.leaves]
        return pytree.tree_unflatten(values, self.spec)

    def describe(self) -> str:
        return pytree.treespec_pprint(self.spec)


def _path_name(path: pytree.KeyPath, roots: tuple[str, ...] | None) -> str:
    """``args.0.x``-style name of a key path; ``roots`` names the top level's children."""
    if roots is None:
        return ".".join(["out", *(_key_name(entry) for entry in path)])
    first = path[0]
    assert isinstance(first, pytree.SequenceKey)  # the root is always the (args, kwargs) pair
    return ".".join([roots[first.idx], *(_key_name(entry) for entry in path[1:])])


def _path_repr(path: pytree.KeyPath, roots: tuple[str, ...] | None) -> str:
    """The key path in Python's notation, e.g. ``args[0]['a.b']``."""
    if roots is None:
        return "out" + pytree.keystr(path)
    first = path[0]
    assert isinstance(first, pytree.SequenceKey)
    return roots[first.idx] + pytree.keystr(path[1:])


def _key_name(entry: Any) -> str:
    if isinstance(entry, pytree.SequenceKey):
        return str(entry.idx)
    if isinstance(entry, pytree.MappingKey):
        return str(entry.key)
    if isinstance(entry, pytree.GetAttrKey):
        return entry.name
    return pytree.keystr((entry,)).lstrip(".")


def _is_tensor_leaf(name: str, value: Any, what: str) -> bool:
    """True for a tensor leaf, False for a constant; a clear TypeError for anything else."""
    if isinstance(value, (torch.Tensor, TensorProxy)):
        return True
    if isinstance(value, CONSTANT_TYPES):
        return False
    kind = type(value)
    if dataclasses.is_dataclass(value):
        raise TypeError(
            f"{what} {name!r} is an instance of {kind.__qualname__}, a dataclass not registered as "
            f"a pytree node; decorate {kind.__qualname__} with @register_pytree_dataclass "
            "(from mlsdk) so that its fields become leaves")
    raise TypeError(
        f"{what} {name!r} is of type {kind.__qualname__}; pytree leaves must be tensors (or "
        "TensorProxies) or int/float/bool/str/None constants, inside tuples, lists, dicts, "
        "NamedTuples or dataclasses registered with @register_pytree_dataclass")


def _describe(value: Any) -> str:
    return value.__qualname__ if isinstance(value, type) else f"a {type(value).__qualname__}"


def _check_args(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not isinstance(args, (tuple, list)):
        raise TypeError("compile_automap() takes the positional arguments as a tuple (e.g. "
                        f"(x,) for one argument), not {_describe(args)}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise TypeError("compile_automap() takes the keyword arguments as a dict of str to "
                        f"values (or None), not {_describe(kwargs)}")
    return tuple(args), dict(kwargs)


# -- compiling --------------------------------------------------------------------------------


class Compiler(Protocol):
    """What :func:`compile_automap` compiles with: :class:`mlsdk.Context` (declared here so
    that this module need not import the facade above it)."""

    @property
    def compile(self) -> Callable[..., CompiledFunction]:
        """``compile(fn, sample_inputs, codegen_dir, **options) -> CompiledFunction``."""


def compile_automap(context: Compiler, fn: Callable[..., Any], args: Any, kwargs: Any,
                    codegen_dir: StoragePath, *, options: Mapping[str, Any] | None = None,
                    io_spec_constraints: Mapping[str, Any] | None = None,
                    **compile_kwargs: Any) -> AutomapFunction:
    """Compile ``fn(*args, **kwargs)``, whose arguments and result are pytrees of tensors.

    :meth:`mlsdk.Context.compile_automap` calls this; see ``docs/pytree.md``.

    Parameters
    ----------
    context : Context
        Where to compile and load the function (anything with ``Context.compile``).
    fn : callable
        Takes tensors, or tuples, lists, dicts, NamedTuples and registered dataclasses of
        them (positionally and by keyword); returns a tensor or any such structure.
    args : tuple
        Sample positional arguments (tensors or TensorProxies at the tensor leaves; int,
        float, bool, str and None leaves are compile-time constants).
    kwargs : dict of str, or None
        Sample keyword arguments.
    codegen_dir : StoragePath
        ``storage.path(...)``: where the device program is written.
    options, io_spec_constraints
        As for :meth:`mlsdk.Context.compile`; constraint keys are leaf names (``out.1``).
    **compile_kwargs
        Passed on to :meth:`mlsdk.Context.compile`.

    Returns
    -------
    AutomapFunction
        Called like ``fn``; returns its structure with TensorProxies at the tensor leaves.

    Raises
    ------
    TypeError
        For a leaf that is neither a tensor nor a constant (an unregistered dataclass says
        to use :func:`register_pytree_dataclass`), or a function that returns no tensor.
    ValueError
        When two leaves would get the same name.
    """
    if not callable(fn):
        raise TypeError(f"compile_automap() takes a callable, not {_describe(fn)}")
    args, kwargs = _check_args(args, kwargs)
    signature, values = _Signature.of((args, kwargs), "argument", _ROOTS)
    samples = {leaf.name: _sample(value)
               for leaf, value in zip(signature.leaves, values, strict=True) if leaf.tensor}
    traced: list[_Signature] = []

    def flat_fn(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        call_args, call_kwargs = signature.rebuild(inputs)
        result = _output_signature(fn(*call_args, **call_kwargs))
        traced[:] = [result[0]]
        return result[1]

    flat_fn.__name__ = flat_fn.__qualname__ = _function_name(fn)
    flat_fn.__wrapped__ = fn  # type: ignore[attr-defined]  # capture names constants after fn
    compiled = context.compile(flat_fn, samples, codegen_dir, options=options,
                               io_spec_constraints=io_spec_constraints, **compile_kwargs)
    if not traced:
        # The compile did not trace fn (a compile cache hit): run it once for its structure.
        with torch.no_grad():
            flat_fn(samples)
    output = traced[0]
    if output.tensors != list(compiled.output_specs):
        raise MLSDKError(f"{compiled.name}: the compiled outputs {list(compiled.output_specs)} "
                         f"are not the function's tensor leaves {output.tensors}")
    return AutomapFunction(compiled, signature, output, list(kwargs))


def _sample(value: torch.Tensor | TensorProxy) -> torch.Tensor:
    # A TensorProxy sample only fixes shape and dtype, like a tensor's; its data stays put.
    if isinstance(value, TensorProxy):
        return torch.zeros(value.spec.shape, dtype=value.spec.dtype)
    return value


def _output_signature(result: Any) -> tuple[_Signature, dict[str, torch.Tensor]]:
    signature, values = _Signature.of(result, "output", None)
    tensors = {leaf.name: value
               for leaf, value in zip(signature.leaves, values, strict=True) if leaf.tensor}
    if not tensors:
        raise TypeError("the function returned no tensor (it returned "
                        f"{signature.describe()}); return a tensor or a structure of tensors")
    return signature, tensors


def _function_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


# -- calling ----------------------------------------------------------------------------------


class AutomapFunction:
    """A compiled function called with (and returning) the structures it was compiled with.

    Positional and keyword arguments may be tuples, lists, dicts, NamedTuples and registered
    dataclasses nesting tensors or TensorProxies; the result has the structure ``fn``
    returned, with a TensorProxy at each tensor leaf. Constants (int, float, bool, str, None)
    were baked in at compile time: a call must give the same value at the same place.

    Attributes
    ----------
    compiled : CompiledFunction
        The underlying dict -> dict function (what runs; what the report names).
    input_specs, output_specs : dict of str to IOSpec
        The flat IO specs, keyed by leaf name (``args.0.x``, ``kwargs.scale``, ``out.1``);
        use these names in ``io_spec_constraints``.
    """

    def __init__(self, compiled: CompiledFunction, inputs: _Signature, outputs: _Signature,
                 kwarg_order: list[str]):
        self.compiled = compiled
        self._inputs = inputs
        self._outputs = outputs
        self._kwarg_order = kwarg_order

    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def input_specs(self) -> dict[str, IOSpec]:
        return self.compiled.input_specs

    @property
    def output_specs(self) -> dict[str, IOSpec]:
        return self.compiled.output_specs

    @property
    def input_specs_tree(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` as compiled, with each tensor replaced by its IOSpec."""
        args, kwargs = self._inputs.rebuild(self.input_specs)
        return args, kwargs

    @property
    def output_specs_tree(self) -> Any:
        """The result's structure, with each tensor replaced by its IOSpec."""
        return self._outputs.rebuild(self.output_specs)

    def unload(self) -> None:
        """Unload the underlying CompiledFunction (see :meth:`CompiledFunction.unload`)."""
        self.compiled.unload()

    def __repr__(self) -> str:
        return (f"AutomapFunction({self.name!r}: {self._inputs.describe()} -> "
                f"{self._outputs.describe()})")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run on ``args`` / ``kwargs`` structured as at compile time; return the structure
        ``fn`` returned, with TensorProxies at its tensor leaves.

        Raises
        ------
        PytreeStructureError
            When the structure, a constant, or the kind of a leaf differs from the compiled
            one, naming the first leaf (or container) that differs.
        """
        if set(kwargs) == set(self._kwarg_order):
            # Keyword order is not structure: put them in the compiled order.
            kwargs = {key: kwargs[key] for key in self._kwarg_order}
        tree = (args, kwargs)
        flat, spec = pytree.tree_flatten_with_path(tree)
        if spec != self._inputs.spec:
            raise PytreeStructureError(f"{self.name}: {self._difference(tree, flat)}")
        inputs = {}
        for leaf, (_, value) in zip(self._inputs.leaves, flat, strict=True):
            tensor = _is_tensor_leaf(leaf.name, value, "argument")
            if leaf.tensor and tensor:
                inputs[leaf.name] = value
            elif leaf.tensor or tensor:
                raise PytreeStructureError(
                    f"{self.name}: argument {leaf.name!r} was compiled as "
                    f"{_leaf_kind(leaf.tensor, leaf.value)}, but this call gives "
                    f"{_leaf_kind(tensor, value)}")
            elif not _same_constant(leaf.value, value):
                raise PytreeStructureError(
                    f"{self.name}: argument {leaf.name!r} was compiled as the constant "
                    f"{leaf.value!r}, but this call gives {value!r}; constants are baked into "
                    "the program: compile again for another value, or pass a tensor")
        return self._outputs.rebuild(self.compiled(inputs))

    def _difference(self, tree: Any, flat: list[tuple[pytree.KeyPath, Any]]) -> str:
        """Name the first leaf or container where the call's structure leaves the compiled."""
        given = {_path_name(path, _ROOTS): path for path, _ in flat}
        for leaf in self._inputs.leaves:
            for depth, kind in enumerate(leaf.containers[1:], start=1):
                found = _get(tree, leaf.path[:depth])
                if found is not _MISSING and type(found) is not kind:
                    where = _path_name(leaf.path[:depth], _ROOTS)
                    return (f"argument {where!r} was compiled as {_type_name(kind)}, but this "
                            f"call gives {_type_name(type(found))}")
            if leaf.name not in given:
                return (f"the call has no leaf {leaf.name!r} (compiled as "
                        f"{_leaf_kind(leaf.tensor, leaf.value)}); compiled structure "
                        f"{self._inputs.describe()}, given {_describe_tree(tree)}")
        compiled = {leaf.name for leaf in self._inputs.leaves}
        for name in given:
            if name not in compiled:
                return (f"the call has an unexpected leaf {name!r}; compiled structure "
                        f"{self._inputs.describe()}, given {_describe_tree(tree)}")
        return (f"the call's structure {_describe_tree(tree)} differs from the compiled "
                f"{self._inputs.describe()} (in the order of dict keys or in empty containers)")


def _get(tree: Any, path: pytree.KeyPath) -> Any:
    try:
        return pytree.key_get(tree, path)
    except (KeyError, IndexError, AttributeError, TypeError):
        return _MISSING


def _describe_tree(tree: Any) -> str:
    return pytree.treespec_pprint(pytree.tree_structure(tree))


def _type_name(kind: type) -> str:
    if pytree.is_namedtuple_class(kind):
        return f"the NamedTuple {kind.__qualname__}"
    if dataclasses.is_dataclass(kind):
        return f"the dataclass {kind.__qualname__}"
    return f"a {kind.__qualname__}"


def _leaf_kind(tensor: bool, value: Any) -> str:
    return "a tensor" if tensor else f"the constant {value!r}"


def _same_constant(compiled: Any, given: Any) -> bool:
    # Same type too: True == 1 == 1.0, but a program compiled for one is not one for another.
    return type(compiled) is type(given) and compiled == given
