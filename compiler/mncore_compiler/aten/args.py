"""Reading a traced aten call's arguments: tensors, scalars, dims, dtypes, clear errors."""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import fx

from ..errors import UnsupportedOperationError
from ..types import FLOAT_IR_DTYPES, dtype_from_torch
from .registry import Builder

__all__ = [
    "slice_bound",
    "cast_to",
    "ir_dtype",
    "norm_dim",
    "norm_dims",
    "out_shape",
    "scalar_arg",
    "scalar_for",
    "tensor_arg",
    "unsupported",
]


def unsupported(node: fx.Node, what: str) -> UnsupportedOperationError:
    """The error for a call with ``what`` (an argument the compiler cannot express)."""
    return UnsupportedOperationError(
        f"{node.target} with {what} is not supported by the MN-Core compiler"
    )


def scalar_arg(node: fx.Node, value: Any) -> float:
    """A scalar argument as a float; unsupported for a bool or a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise unsupported(node, f"the non-float scalar argument {value!r}")
    return float(value)


def scalar_for(b: Builder, node: fx.Node, x: str, value: Any) -> float | int:
    """A scalar operand of ``x``: an int stays an int for an integer or bool tensor, so that
    ``labels + 1`` stays int64 as in torch; otherwise a float."""
    number = scalar_arg(node, value)
    integral = b.type(x).dtype not in FLOAT_IR_DTYPES
    return int(value) if integral and isinstance(value, int) else number


def tensor_arg(node: fx.Node, value: Any) -> str:
    """A tensor argument's IR value name; unsupported for anything else."""
    if not isinstance(value, str):
        raise unsupported(node, f"the non-tensor argument {value!r}")
    return value


def ir_dtype(node: fx.Node, dtype: torch.dtype) -> str:
    """The IR dtype of a torch dtype; unsupported for one the IR has not."""
    try:
        return dtype_from_torch(dtype)
    except TypeError:
        raise unsupported(node, f"dtype={dtype}") from None


def out_shape(node: fx.Node) -> tuple[int, ...]:
    """The shape torch computed for the call's result."""
    return tuple(int(d) for d in node.meta["val"].shape)


def norm_dim(dim: int, rank: int) -> int:
    """A dim as a non-negative index (``-1`` -> ``rank - 1``; 0-d tensors take 0)."""
    return dim % max(rank, 1)


def norm_dims(dims: Any, rank: int) -> tuple[int, ...]:
    """Dims as a sorted tuple of distinct non-negative indices; None or ``[]`` is all."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({norm_dim(d, rank) for d in dims}))


def cast_to(b: Builder, node: fx.Node, x: str, dtype: torch.dtype | None) -> str:
    """``x`` cast to ``dtype`` (unchanged when ``dtype`` is None or already its dtype)."""
    if dtype is None:
        return x
    target = ir_dtype(node, dtype)
    return x if b.type(x).dtype == target else b.emit("cast", [x], dtype=target)


def slice_bound(value: Any, size: int, default: int) -> int:
    """A slice bound as torch clamps it: None (or ``sys.maxsize``, torch's "to the end") is
    ``default``, negatives count from the end, the rest is clamped to ``[0, size]``."""
    if value is None or value == sys.maxsize:
        return default
    value = int(value)
    if value < 0:
        value += size
    return min(max(value, 0), size)
