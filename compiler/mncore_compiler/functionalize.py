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

:class:`StateSnapshot` keeps the user's tensors unchanged: tracing in real mode runs the step
for real, so every tensor it may touch (parameters, buffers, gradients, optimizer state) is
copied first and put back afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import fx

from .aten.strided import reshape_view_of
from .errors import CaptureError, UnsupportedOperationError

__all__ = ["Functionalizer", "OptimizerRecord", "StateSnapshot", "closure_objects",
           "closure_tensor_names",
           "optimizer_state_names", "reshapes_in_place", "undo_view"]

#: Ops whose result is a fresh random tensor: a traced Dropout in train() mode, torch.rand.
RANDOM_OPS = ("native_dropout", "bernoulli", "rand", "randn", "randint", "normal", "uniform",
              "dropout", "multinomial", "randperm", "exponential")


# -- what the function closes over --------------------------------------------------------------


def closure_objects(fn: Callable[..., Any]) -> dict[str, object]:
    """Variable name -> value for every free variable and global ``fn`` reads, and ``self``
    for a bound method. A bound method of a plain object also contributes that object's
    attributes (``self.model``, ``self.opt``), named ``self.<attr>``."""
    found: dict[str, object] = {}
    code = getattr(fn, "__code__", None)
    if code is not None and fn.__closure__ is not None:  # type: ignore[attr-defined]
        cells = fn.__closure__  # type: ignore[attr-defined]
        for var, cell in zip(code.co_freevars, cells, strict=True):
            try:
                found[var] = cell.cell_contents
            except ValueError:  # an empty cell: the variable is assigned later
                continue
    if code is not None:
        globals_ = getattr(fn, "__globals__", {})
        found.update({n: globals_[n] for n in code.co_names if n in globals_})
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        found["self"] = owner
    elif owner is not None and hasattr(owner, "__dict__"):
        for attr, value in vars(owner).items():
            if isinstance(value, (torch.nn.Module, torch.optim.Optimizer, torch.Tensor)):
                found[f"self.{attr}"] = value
    return found


@dataclass(frozen=True)
class OptimizerRecord:
    """An optimizer the function closes over, and the ``id`` of each parameter of each of its
    param groups when it was captured (a compiled step is only valid for those)."""

    name: str
    optimizer: torch.optim.Optimizer
    param_ids: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, name: str, optimizer: torch.optim.Optimizer) -> OptimizerRecord:
        return cls(name, optimizer, _param_ids(optimizer))

    def changed(self) -> str | None:
        """None when the parameter lists are as captured, else what changed."""
        now = _param_ids(self.optimizer)
        if len(now) != len(self.param_ids):
            return (f"it had {len(self.param_ids)} param group(s) when compiled and has "
                    f"{len(now)} now")
        for index, (then, current) in enumerate(zip(self.param_ids, now, strict=True)):
            if then != current:
                return (f"param group {index} held {len(then)} parameter(s) when compiled and "
                        f"holds {len(current)} now, not the same tensors")
        return None


def _param_ids(optimizer: torch.optim.Optimizer) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(id(p) for p in group["params"]) for group in optimizer.param_groups)


# -- snapshot and restore -----------------------------------------------------------------------


@dataclass
class StateSnapshot:
    """Copies of every tensor a traced step may change, to put back after tracing.

    Built from :func:`closure_objects`: modules (parameters, buffers, their ``.grad``),
    optimizers (their parameters, gradients and ``state``) and closed-over tensors.
    """

    values: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    grads: list[tuple[torch.Tensor, torch.Tensor | None]] = field(default_factory=list)
    opt_states: list[tuple[str, torch.optim.Optimizer, dict[Any, dict[str, Any]]]] = field(
        default_factory=list)
    #: ``id`` of each pre-existing ``.grad`` tensor -> a readable name.
    grad_ids: dict[int, str] = field(default_factory=dict)

    @classmethod
    def take(cls, objects: Mapping[str, object]) -> StateSnapshot:
        snap = cls()
        seen: set[int] = set()
        grad_seen: set[int] = set()

        def keep(tensor: torch.Tensor) -> None:
            if id(tensor) not in seen:
                seen.add(id(tensor))
                snap.values.append((tensor, tensor.detach().clone()))

        def keep_grad(p: torch.Tensor, name: str) -> None:
            if id(p) in grad_seen:
                return
            grad_seen.add(id(p))
            grad = p.grad
            snap.grads.append((p, grad))
            if grad is not None:
                keep(grad)
                snap.grad_ids[id(grad)] = f"{name}.grad"

        for var, obj in objects.items():
            if isinstance(obj, torch.nn.Module):
                for sub, tensor in obj.state_dict(keep_vars=True).items():
                    keep(tensor)
                    keep_grad(tensor, f"{var}.{sub}")
            elif isinstance(obj, torch.optim.Optimizer):
                names = _param_names(objects)
                state = {p: dict(s) for p, s in obj.state.items()}
                snap.opt_states.append((var, obj, state))
                for group in obj.param_groups:
                    for p in group["params"]:
                        keep(p)
                        keep_grad(p, names.get(id(p), "a parameter"))
                for entries in state.values():
                    for value in entries.values():
                        if isinstance(value, torch.Tensor):
                            keep(value)
                for tensor in held_tensors(obj):
                    keep(tensor)
            elif isinstance(obj, torch.Tensor):
                keep(obj)
        return snap

    def restore(self) -> None:
        """Put every value, ``.grad`` and optimizer state back as it was."""
        with torch.no_grad():
            for tensor, saved in self.values:
                if not _self_overlapping(tensor):  # never written in place: torch refuses
                    tensor.copy_(saved)
        for p, grad in self.grads:
            p.grad = grad
        for _, optimizer, state in self.opt_states:
            for p in [p for p in optimizer.state if p not in state]:
                del optimizer.state[p]
            for p, entries in state.items():
                optimizer.state[p].clear()
                optimizer.state[p].update(entries)

    def created_state(self) -> list[str]:
        """Optimizer state tensors the traced step created (its first step): compiled, every
        call would run that first step again."""
        created = []
        for var, optimizer, before in self.opt_states:
            names = {id(p): f"parameter #{i}" for i, p in enumerate(
                p for g in optimizer.param_groups for p in g["params"])}
            for p, entries in optimizer.state.items():
                old = before.get(p, {})
                for key, value in entries.items():
                    if isinstance(value, torch.Tensor) and old.get(key) is not value:
                        created.append(f"{var}.state[{names.get(id(p), 'param')}][{key!r}]")
        return created


def _self_overlapping(tensor: torch.Tensor) -> bool:
    """Whether elements of ``tensor`` share memory (an ``expand``ed view: a stride of 0 over
    a dimension of more than one element), so no in-place write can have changed it."""
    return any(stride == 0 and size > 1
               for stride, size in zip(tensor.stride(), tensor.shape, strict=True))


def held_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Tensors an optimizer holds outside ``state`` and ``param_groups``: in its attributes,
    directly or in lists, tuples and dicts (the MN-Core optimizers' lr tensors and SGD's
    ``momentum_started`` flags). Its step may update them in place like its state."""
    found: list[torch.Tensor] = []

    def walk(value: object, depth: int) -> None:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif depth < 3 and isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)
        elif depth < 3 and isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)

    for key, value in vars(optimizer).items():
        if key not in ("state", "param_groups", "defaults"):
            walk(value, 0)
    return found


def optimizer_state_names(objects: Mapping[str, object]) -> dict[int, str]:
    """``id`` of each optimizer state tensor -> a readable name,
    ``opt.state[model.fc.weight]['momentum_buffer']``."""
    names = _param_names(objects)
    found: dict[int, str] = {}
    for var, obj in objects.items():
        if isinstance(obj, torch.optim.Optimizer):
            for p, entries in obj.state.items():
                for key, value in entries.items():
                    if isinstance(value, torch.Tensor):
                        where = names.get(id(p), "param")
                        found.setdefault(id(value), f"{var}.state[{where}][{key!r}]")
    return found


def closure_tensor_names(found: Mapping[str, object]) -> dict[int, str]:
    """Map ``id`` of every tensor reachable from a function's free variables (as
    :func:`~mncore_compiler.functionalize.closure_objects` found them) to a readable name."""
    names: dict[int, str] = {}
    for var, obj in found.items():
        if isinstance(obj, torch.nn.Module):
            for sub, tensor in obj.state_dict(keep_vars=True).items():
                names.setdefault(id(tensor), f"{var}.{sub}")
        elif isinstance(obj, torch.Tensor):
            names.setdefault(id(obj), var)
    for key, name in optimizer_state_names(found).items():
        names.setdefault(key, name)
    return names


def _param_names(objects: Mapping[str, object]) -> dict[int, str]:
    names: dict[int, str] = {}
    for var, obj in objects.items():
        if isinstance(obj, torch.nn.Module):
            for sub, tensor in obj.named_parameters():
                names.setdefault(id(tensor), f"{var}.{sub}")
    return names


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
