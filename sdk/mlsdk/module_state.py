"""Module state a training step updates that MLSDK programs leave unregistered: the running
statistics of BatchNorm (and InstanceNorm with ``track_running_stats``) in ``train()`` mode.

MLSDK programs register a model's parameters (``context.register_param``) and the optimizer's
buffers, not the normalisation layers' ``running_mean``, ``running_var`` and
``num_batches_tracked``, which torch updates in place in every training forward. So that such a
step compiles and keeps those statistics on the device, updated in place at every call,
``Context.compile`` registers them itself before capturing (unless ``training=False``), as
buffers of the Context's registry under the module's names (the name they already carry from
``set_tensor_name_in_module``, else the registered parameters' prefix and the buffer's path):
shared with every function of the Context that reads them (an ``eval()`` inference compiled
later reads the trained statistics), and written back to the host tensors by
``context.synchronize()``. See ``docs/registry.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from mncore_compiler.step_state import closure_objects

from .naming import get_tensor_name, set_tensor_name
from .registry import Registry

__all__ = ["register_running_stats", "running_stats"]

_STATS = ("running_mean", "running_var", "num_batches_tracked")


def running_stats(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(path, tensor) of each running statistic a ``train()``-mode forward of ``module``
    updates in place (``"bn1.running_mean"``, ...)."""
    found = []
    for path, sub in module.named_modules():
        if not sub.training or not getattr(sub, "track_running_stats", False):
            continue
        for key in _STATS:
            tensor = getattr(sub, key, None)
            if isinstance(tensor, torch.Tensor):
                found.append((f"{path}.{key}" if path else key, tensor))
    return found


def register_running_stats(registry: Registry, fn: Callable[..., Any]) -> list[str]:
    """Register the unregistered running statistics of the modules ``fn`` closes over whose
    parameters are registered in ``registry``; return the names registered.

    A module none of whose parameters is registered is left alone (its statistics stay
    constants, and capture says what to register if the function updates them).
    """
    items: dict[int, tuple[str, torch.Tensor, str]] = {}
    for obj in closure_objects(inspect.unwrap(fn)).values():
        if not isinstance(obj, torch.nn.Module):
            continue
        stats = [(p, t) for p, t in running_stats(obj) if registry.name_of(t) is None]
        if not stats:
            continue
        prefix = _registered_prefix(registry, obj)
        if prefix is None:
            continue
        for path, tensor in stats:
            name = get_tensor_name(tensor) or f"{prefix}.{path}"
            items.setdefault(id(tensor), (name, tensor, "buffer"))
    if not items:
        return []
    for name, tensor, _ in items.values():
        if get_tensor_name(tensor) is None:
            set_tensor_name(tensor, name)
    return registry.register_named(items.values())


def _registered_prefix(registry: Registry, module: torch.nn.Module) -> str | None:
    """The prefix ``module``'s registered parameters are named under (``"model0"`` for
    ``model0.conv1.weight``), or None when none is registered."""
    for path, p in module.named_parameters():
        name = registry.name_of(p)
        if name is not None and name.endswith(f".{path}"):
            return name[: -len(path) - 1]
    return None
