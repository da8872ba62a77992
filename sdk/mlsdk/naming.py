"""Tensor names: what registers a module's parameters and buffers (see ``docs/registry.md``).

A name is held beside the tensor, weakly: naming a tensor never keeps it alive, and a copy of a
module (``copy.deepcopy``) starts unnamed.
"""

from __future__ import annotations

import weakref

import torch

from .errors import MLSDKError

__all__ = ["RegistrationError", "set_tensor_name", "get_tensor_name",
           "set_tensor_name_in_module"]


class RegistrationError(MLSDKError, ValueError):
    """A tensor name or a registration the registry cannot accept, or a registered value
    asked of a tensor that is not registered."""


# -- tensor names -------------------------------------------------------------------------------

# id(tensor) -> (a weak reference to it, its name). Weak: naming a tensor never keeps it alive,
# and a copy of a module (copy.deepcopy) starts unnamed.
_NAMES: dict[int, tuple[weakref.ReferenceType[torch.Tensor], str]] = {}


def _forget(key: int, ref: weakref.ReferenceType[torch.Tensor]) -> None:
    # Called when the tensor dies; a later tensor with the same id may hold the slot by now.
    entry = _NAMES.get(key)
    if entry is not None and entry[0] is ref:
        _NAMES.pop(key, None)


def check_tensor(tensor: object, what: str) -> torch.Tensor:
    """``tensor``, when it is a torch.Tensor; else TypeError naming ``what``."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, not {type(tensor).__name__}")
    return tensor


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    if not name or name != name.strip():
        raise ValueError(f"{what} must be a non-empty str without surrounding spaces, "
                         f"not {name!r}")
    return name


def set_tensor_name(tensor: torch.Tensor, name: str) -> None:
    """Name ``tensor`` (replacing any earlier name); the name is what registers it.

    Parameters
    ----------
    tensor : torch.Tensor
        Typically an ``nn.Parameter`` or a module buffer. It is not kept alive by its name.
    name : str
        Non-empty, e.g. ``"model.fc.weight"``.
    """
    check_tensor(tensor, "set_tensor_name's tensor")
    _check_name(name, "A tensor name")
    key = id(tensor)
    _NAMES[key] = (weakref.ref(tensor, lambda ref: _forget(key, ref)), name)


def get_tensor_name(tensor: torch.Tensor) -> str | None:
    """The name given by :func:`set_tensor_name` (or a module naming), None when unnamed."""
    check_tensor(tensor, "get_tensor_name's tensor")
    entry = _NAMES.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1]


def set_tensor_name_in_module(module: torch.nn.Module, prefix: str) -> None:
    """Name every parameter and buffer of ``module`` ``prefix.<qualified name>``.

    A parameter shared by two submodules (tied weights) gets the first of its names, as
    ``module.named_parameters()`` lists it.

    Examples
    --------
    >>> model = torch.nn.Linear(4, 2)
    >>> set_tensor_name_in_module(model, "model")
    >>> get_tensor_name(model.weight)
    'model.weight'
    """
    for name, tensor, _ in module_tensors(module, prefix):
        set_tensor_name(tensor, name)


def module_tensors(module: object, prefix: str) -> list[tuple[str, torch.Tensor, str]]:
    """(name, tensor, kind) of each parameter and buffer of ``module`` under ``prefix``."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"Expected a torch.nn.Module, not {type(module).__name__}")
    _check_name(prefix, "A module's name prefix")
    found: list[tuple[str, torch.Tensor, str]] = [
        (f"{prefix}.{n}", t, "parameter") for n, t in module.named_parameters()]
    found += [(f"{prefix}.{n}", t, "buffer") for n, t in module.named_buffers()]
    return found
