"""Data movement only (no FLOPs): ``reshape``, ``permute``, ``expand``, ``cat``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..types import TensorType, dtype_from_torch
from .registry import Attrs, OpTypeError, register
from .rules import check_dim, check_shape, is_int, no_flops, numel

__all__: list[str] = []


def _reshape_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    shape = check_shape(attrs["shape"])
    if numel(shape) != x.numel:
        raise OpTypeError(f"cannot reshape {x} ({x.numel} elements) to {list(shape)}")
    return TensorType(shape, x.dtype)


def _permute_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dims = attrs["dims"]
    if (not isinstance(dims, tuple) or not all(is_int(d) for d in dims)
            or sorted(dims) != list(range(x.rank))):
        raise OpTypeError(f"dims must be a permutation of 0..{x.rank - 1}, not {dims!r}")
    return TensorType(tuple(x.shape[d] for d in dims), x.dtype)


def _expand_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    shape = check_shape(attrs["shape"])
    lead = len(shape) - x.rank
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise OpTypeError(f"cannot expand {x} to {list(shape)}")
    return TensorType(shape, x.dtype)


def _cat_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    first = types[0]
    dim = attrs["dim"]
    if first.rank == 0:
        raise OpTypeError("cat needs operands of rank >= 1")
    check_dim(dim, first.rank)
    dtype = first.torch_dtype
    for t in types[1:]:
        others = [d for i, d in enumerate(t.shape) if i != dim]
        if t.rank != first.rank or others != [d for i, d in enumerate(first.shape) if i != dim]:
            raise OpTypeError(f"cat operands {first} and {t} differ outside dim {dim}")
        dtype = torch.promote_types(dtype, t.torch_dtype)
    size = sum(t.shape[dim] for t in types)
    shape = first.shape[:dim] + (size,) + first.shape[dim + 1 :]
    return TensorType(shape, dtype_from_torch(dtype))


register(
    "reshape", "layout", 1, ("shape",), _reshape_rule,
    lambda x, a: x[0].reshape(a["shape"]), no_flops,
    lambda a, t: ("{0}.reshape({shape})", {"shape": a["shape"]}),
)  # fmt: skip


register(
    "permute", "layout", 1, ("dims",), _permute_rule,
    lambda x, a: x[0].permute(a["dims"]), no_flops,
    lambda a, t: ("{0}.permute({dims})", {"dims": a["dims"]}),
)  # fmt: skip


register(
    "expand", "layout", 1, ("shape",), _expand_rule,
    lambda x, a: x[0].expand(a["shape"]), no_flops,
    lambda a, t: ("{0}.expand({shape})", {"shape": a["shape"]}),
)  # fmt: skip


register(
    "cat", "layout", None, ("dim",), _cat_rule,
    lambda x, a: torch.cat(list(x), dim=a["dim"]), no_flops,
    lambda a, t: ("{cat}([{xs}], dim={dim})", {"cat": torch.cat, "dim": a["dim"]}),
)  # fmt: skip
