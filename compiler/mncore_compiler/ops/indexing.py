"""Indexing IR ops: ``slice``, ``index_select``, ``gather``, ``index_add``, and the scans
``cumsum`` and ``cumprod``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..types import FLOAT_IR_DTYPES, TensorType
from .registry import Attrs, OpTypeError, register
from .rules import check_dim, check_index, index_rows_rule, is_int, no_flops, per_output

__all__: list[str] = []


def _slice_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dim, start, end, step = (attrs[k] for k in ("dim", "start", "end", "step"))
    if x.rank == 0:
        raise OpTypeError("slice needs an operand of rank >= 1")
    check_dim(dim, x.rank)
    if not (is_int(start) and is_int(end) and is_int(step)) or step < 1:
        raise OpTypeError(f"start, end must be ints and step a positive int, not "
                          f"{start!r}, {end!r}, {step!r}")
    if not 0 <= start <= end <= x.shape[dim]:
        raise OpTypeError(f"slice [{start}:{end}] is outside dim {dim} of {x}")
    size = -(-(end - start) // step)
    return TensorType(x.shape[:dim] + (size,) + x.shape[dim + 1:], x.dtype)


def _slice_reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    part = x[0].narrow(a["dim"], a["start"], a["end"] - a["start"])
    if a["step"] != 1:  # a step of 1 keeps every element: no indexing
        part = part[(slice(None),) * a["dim"] + (slice(None, None, a["step"]),)]
    return part.contiguous()


def _slice_inline(a: Attrs, result: TensorType) -> tuple[str, dict[str, Any]] | None:
    if a["step"] != 1:
        return None
    return ("{0}.narrow({dim}, {start}, {length}).contiguous()",
            {"dim": a["dim"], "start": a["start"], "length": a["end"] - a["start"]})


register(
    "slice", "layout", 1, ("dim", "start", "end", "step"), _slice_rule, _slice_reference,
    no_flops, _slice_inline,
)  # fmt: skip


def _index_select_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, index = types
    check_dim(attrs["dim"], x.rank)
    check_index(index, "index_select")
    if index.rank != 1 or x.rank == 0:
        raise OpTypeError(f"index_select takes a 1-D index into a tensor of rank >= 1, not "
                          f"{index} into {x}")
    dim = attrs["dim"]
    return TensorType(x.shape[:dim] + index.shape + x.shape[dim + 1:], x.dtype)


# An index out of range is torch's IndexError in the reference, as on the device.
register(
    "index_select", "layout", 2, ("dim",), _index_select_rule,
    lambda x, a: torch.index_select(x[0], a["dim"], x[1]), no_flops,
    lambda a, t: ("{fn}({0}, {dim}, {1})", {"fn": torch.index_select, "dim": a["dim"]}),
)  # fmt: skip


def _gather_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, index = types
    dim = attrs["dim"]
    check_dim(dim, x.rank)
    check_index(index, "gather")
    if index.rank != x.rank or any(
            i > s for d, (i, s) in enumerate(zip(index.shape, x.shape, strict=True)) if d != dim):
        raise OpTypeError(f"gather's index {index} must have the rank of {x} and no larger "
                          f"size outside dim {dim}")
    return TensorType(index.shape, x.dtype)


register(
    "gather", "layout", 2, ("dim",), _gather_rule,
    lambda x, a: torch.gather(x[0], a["dim"], x[1]), no_flops,
)  # fmt: skip


# Rows of ``source`` add into ``base`` in index order (torch's CPU kernel's order).
register(
    "index_add", "elementwise", 3, ("dim",), index_rows_rule("index_add"),
    lambda x, a: torch.index_add(x[0], a["dim"], x[1], x[2]),
    lambda types, attrs, result: types[2].numel,
)  # fmt: skip


def _scatter_add_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    base, index, source = types
    dim = attrs["dim"]
    check_dim(dim, base.rank)
    check_index(index, "scatter_add")
    if (index.rank != base.rank or source.rank != base.rank or source.dtype != base.dtype
            or any(i > s for i, s in zip(index.shape, source.shape, strict=True))
            or any(i > b for d, (i, b) in enumerate(zip(index.shape, base.shape, strict=True))
                   if d != dim)):
        raise OpTypeError(f"scatter_add into {base} along dim {dim} takes an index and a "
                          f"{base.dtype} source of its rank, the index no larger than either, "
                          f"not {index} and {source}")
    return base


# gather's backward: each source value adds into base at its index along dim.
register(
    "scatter_add", "elementwise", 3, ("dim",), _scatter_add_rule,
    lambda x, a: torch.scatter_add(x[0], a["dim"], x[1], x[2]),
    lambda types, attrs, result: types[1].numel,
)  # fmt: skip


# sort's and topk's backward: each source value replaces base's at its index along dim (an
# index given twice keeps one of its values, as torch leaves unspecified which).
register(
    "scatter", "layout", 3, ("dim",), _scatter_add_rule,
    lambda x, a: torch.scatter(x[0], a["dim"], x[1], x[2]), no_flops,
)  # fmt: skip


def _cumsum_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    check_dim(attrs["dim"], x.rank)
    # torch accumulates integers and bools in int64.
    return x if x.dtype in FLOAT_IR_DTYPES else TensorType(x.shape, "int64")


register(
    "cumsum", "reduction", 1, ("dim",), _cumsum_rule,
    lambda x, a: torch.cumsum(x[0], a["dim"]), per_output(1),
)  # fmt: skip


register(
    "cumprod", "reduction", 1, ("dim",), _cumsum_rule,
    lambda x, a: torch.cumprod(x[0], a["dim"]), per_output(1),
)  # fmt: skip
