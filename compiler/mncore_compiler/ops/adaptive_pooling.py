"""Adaptive max pooling over the last two dims, and its backward (timm's ``adaptive_avgmax``
and ``max`` global pools).

``adaptive_max_pool`` and ``adaptive_max_pool_indices`` are the two results of aten's
``adaptive_max_pool2d`` (the indices are int64 offsets into each ``H * W`` plane, as torch
gives them); ``adaptive_max_pool_backward`` (gradient, input, indices) is torch's backward
kernel, which sends each gradient element to the position its window's maximum came from.
The type rules ask torch's meta kernels after checking ``output_size``.

FLOPs: one per input element read for the forward (the windows of an adaptive pool tile the
input, overlapping by at most one row or column), one per gradient element scattered back.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..types import TensorType
from .conv import meta_rule
from .registry import Attrs, InferRule, OpTypeError, register
from .rules import check_shape, per_input

__all__: list[str] = []

aten = torch.ops.aten


def _pool(x: Sequence[torch.Tensor], a: Attrs, which: int) -> torch.Tensor:
    result: torch.Tensor = aten.adaptive_max_pool2d(x[0], list(a["output_size"]))[which]
    return result


def _backward(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    grad, data, indices = x
    return aten.adaptive_max_pool2d_backward(grad, data, indices)


def _check(what: str, types: Sequence[TensorType]) -> None:
    if types[0].rank not in (3, 4):
        raise OpTypeError(f"{what} takes a [C, H, W] or [N, C, H, W] tensor, got {types[0]}")


def _pool_rule(which: int) -> InferRule:
    what = ("adaptive_max_pool", "adaptive_max_pool_indices")[which]

    def rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        _check(what, types)
        size = check_shape(attrs["output_size"], "output_size")
        if len(size) != 2 or 0 in size:
            raise OpTypeError(f"{what}'s output_size must be 2 positive ints, not {size!r}")
        return meta_rule(what, lambda x, a: _pool(x, a, which), types, attrs)

    return rule


def _backward_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    what = "adaptive_max_pool_backward"
    grad, data, indices = types
    _check(what, [data])
    if indices.dtype != "int64" or indices.shape != grad.shape:
        raise OpTypeError(f"{what} takes int64 indices of the gradient's shape {list(grad.shape)}"
                          f", not {indices}")
    if grad.rank != data.rank or grad.shape[:-2] != data.shape[:-2]:
        raise OpTypeError(f"{what}'s gradient {grad} does not match its input {data}")
    return meta_rule(what, lambda x, a: torch.empty_like(x[1]), [grad, data], attrs)


register("adaptive_max_pool", "reduction", 1, ("output_size",), _pool_rule(0),
         lambda x, a: _pool(x, a, 0), per_input(1))  # fmt: skip

register("adaptive_max_pool_indices", "reduction", 1, ("output_size",), _pool_rule(1),
         lambda x, a: _pool(x, a, 1), per_input(1))  # fmt: skip

register("adaptive_max_pool_backward", "reduction", 3, (), _backward_rule, _backward,
         per_input(1))  # fmt: skip
