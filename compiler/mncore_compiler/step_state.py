"""What a traced training step touches: the objects its function closes over, the optimizers
among them and the names of their state, and a snapshot of every tensor the step may change.

:class:`StateSnapshot` keeps the user's tensors unchanged: tracing in real mode runs the step
for real, so every tensor it may touch (parameters, buffers, gradients, optimizer state) is
copied first and put back afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["OptimizerRecord", "StateSnapshot", "closure_objects", "closure_tensor_names",
           "held_tensors", "optimizer_state_names"]


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
    :func:`~mncore_compiler.step_state.closure_objects` found them) to a readable name."""
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
