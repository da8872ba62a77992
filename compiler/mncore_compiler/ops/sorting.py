"""Sorting IR ops: ``argsort`` (stable: equal values keep their order), ``histc``, and
``grouped_mm``, a matmul per group of consecutive rows (mixture-of-experts layers), with its
weight gradient ``grouped_mm_weight_grad``.

``sort`` and ``topk`` are ``argsort`` then a ``gather`` (and a ``slice`` for ``topk``), so the
values and the indices always agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..types import FLOAT_IR_DTYPES, TensorType
from .registry import Attrs, OpTypeError, register
from .rules import check_dim, check_index, is_int, per_input

__all__: list[str] = []


def _argsort_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    check_dim(attrs["dim"], x.rank)
    if not isinstance(attrs["descending"], bool):
        raise OpTypeError(f"descending must be a bool, not {attrs['descending']!r}")
    return TensorType(x.shape, "int64")


def _argsort(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.sort(x[0], dim=a["dim"], descending=a["descending"], stable=True).indices


def _sort_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    (x,) = types
    length = x.shape[attrs["dim"]] if x.rank else 1
    return x.numel * max(1, math.ceil(math.log2(max(length, 2))))


register("argsort", "reduction", 1, ("dim", "descending"), _argsort_rule, _argsort,
         _sort_flops)  # fmt: skip


def _histc_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    bins, low, high = attrs["bins"], attrs["min"], attrs["max"]
    if not is_int(bins) or bins < 1:
        raise OpTypeError(f"bins must be a positive int, not {bins!r}")
    if not all(isinstance(v, float) for v in (low, high)) or low > high:
        raise OpTypeError(f"min and max must be floats with min <= max, not {low!r}, {high!r}")
    if x.dtype not in FLOAT_IR_DTYPES:
        raise OpTypeError(f"histc counts a float tensor, not {x}")
    return TensorType((bins,), x.dtype)


# min == max (torch's default 0, 0): the range is the data's own minimum and maximum.
register(
    "histc", "reduction", 1, ("bins", "min", "max"), _histc_rule,
    lambda x, a: torch.histc(x[0], bins=a["bins"], min=a["min"], max=a["max"]), per_input(2),
)  # fmt: skip


def _group_rows(offsets: torch.Tensor, rows: int) -> list[tuple[int, int, int]]:
    """``(group, start, end)`` of each group's rows: group ``g`` has rows
    ``offsets[g - 1]:offsets[g]`` (``0:offsets[0]`` for the first); rows past the last offset
    belong to none."""
    bounds = [0, *(min(int(v), rows) for v in offsets.tolist())]
    return [(g, bounds[g], bounds[g + 1]) for g in range(len(bounds) - 1)
            if bounds[g + 1] > bounds[g]]


def _grouped_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, weight, offsets = types
    check_index(offsets, "grouped_mm offsets")
    if (x.rank != 2 or weight.rank != 3 or offsets.rank != 1 or x.shape[1] != weight.shape[1]
            or offsets.shape[0] != weight.shape[0] or x.dtype != weight.dtype):
        raise OpTypeError(f"grouped_mm takes [S, K] rows, [G, K, N] weights of their dtype and "
                          f"[G] offsets, not {x}, {weight} and {offsets}")
    return TensorType((x.shape[0], weight.shape[2]), x.dtype)


def _grouped_mm(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    rows, weight, offsets = x
    out = torch.zeros(rows.shape[0], weight.shape[2], dtype=rows.dtype)
    for group, start, end in _group_rows(offsets, rows.shape[0]):
        out[start:end] = rows[start:end] @ weight[group]
    return out


def _grouped_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return 2 * types[0].numel * result.shape[1]


register("grouped_mm", "matmul", 3, (), _grouped_rule, _grouped_mm,
         _grouped_flops)  # fmt: skip


def _weight_grad_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, grad, offsets = types
    check_index(offsets, "grouped_mm_weight_grad offsets")
    if (x.rank != 2 or grad.rank != 2 or offsets.rank != 1 or x.shape[0] != grad.shape[0]
            or x.dtype != grad.dtype):
        raise OpTypeError(f"grouped_mm_weight_grad takes [S, K] rows, [S, N] gradients of "
                          f"their dtype and [G] offsets, not {x}, {grad} and {offsets}")
    return TensorType((offsets.shape[0], x.shape[1], grad.shape[1]), x.dtype)


def _weight_grad(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    rows, grad, offsets = x
    out = torch.zeros(offsets.shape[0], rows.shape[1], grad.shape[1], dtype=rows.dtype)
    for group, start, end in _group_rows(offsets, rows.shape[0]):
        out[group] = rows[start:end].T @ grad[start:end]
    return out


register("grouped_mm_weight_grad", "matmul", 3, (), _weight_grad_rule, _weight_grad,
         lambda types, attrs, result: 2 * types[0].numel * types[1].shape[1])  # fmt: skip


