"""Convolution over 1 or 2 spatial dims (stride, padding, dilation, groups) and its gradients.

``conv`` is ``aten.convolution`` without the bias (the handler adds it as a broadcast ``add``);
``conv_input_grad`` and ``conv_weight_grad`` are the two halves of ``aten.convolution_backward``
that are not a plain sum. The type rules ask torch's meta kernels for the result shape, after
checking the attributes themselves, so the IR's shapes are torch's by construction.

FLOPs: ``2 * N * C_out * prod(out spatial) * (C_in / groups) * prod(kernel)`` for each of the
three ops (each gradient is a convolution of the same size).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..types import FLOAT_IR_DTYPES, TensorType, dtype_from_torch
from .registry import Attrs, OpTypeError, register
from .rules import check_shape, is_int, meta_tensor

__all__ = ["CONV_ATTRS", "check_spatial", "meta_rule"]

#: The attributes every convolution op carries.
CONV_ATTRS: tuple[str, ...] = ("stride", "padding", "dilation", "groups")


def check_spatial(attrs: Attrs, keys: Sequence[str], spatial: int) -> None:
    """``OpTypeError`` unless each ``attrs[key]`` is ``spatial`` ints (padding >= 0, else >= 1)."""
    for key in keys:
        value, low = attrs[key], 0 if key == "padding" else 1
        if (not isinstance(value, tuple) or len(value) != spatial
                or not all(is_int(d) and d >= low for d in value)):
            raise OpTypeError(f"{key} must be a list of {spatial} ints >= {low}, not {value!r}")


def meta_rule(what: str, fn: Callable[[Sequence[torch.Tensor], Attrs], torch.Tensor],
              types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """The type of ``fn`` applied to float operands of these types, as torch's meta kernel says."""
    for t in types:
        if t.dtype not in FLOAT_IR_DTYPES:
            raise OpTypeError(f"{what} takes floating-point operands, got {t.dtype}")
    if len({t.dtype for t in types}) != 1:
        raise OpTypeError(f"{what} operands must have one dtype, got {[t.dtype for t in types]}")
    try:
        out = fn([meta_tensor(t) for t in types], attrs)
    except (RuntimeError, ValueError, IndexError) as error:
        raise OpTypeError(f"{what} rejects operands {[str(t) for t in types]} with "
                          f"{dict(attrs)}: {error}") from None
    return TensorType(tuple(out.shape), dtype_from_torch(out.dtype))


def _conv_args(a: Attrs) -> tuple[list[int], list[int], list[int], bool, list[int], int]:
    spatial = len(a["stride"])
    return (list(a["stride"]), list(a["padding"]), list(a["dilation"]), False, [0] * spatial,
            a["groups"])


def _conv(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.ops.aten.convolution(x[0], x[1], None, *_conv_args(a))


def _conv_inline(a: Attrs, result: TensorType) -> tuple[str, dict[str, Any]]:
    # torch.convolution is the public binding of the same aten op (aten::convolution).
    args = dict(zip(("stride", "padding", "dilation", "transposed", "output_padding", "groups"),
                    _conv_args(a), strict=True))
    return ("{fn}({0}, {1}, None, {stride}, {padding}, {dilation}, {transposed}, "
            "{output_padding}, {groups})", {"fn": torch.convolution, **args})


def _backward(x: Sequence[torch.Tensor], a: Attrs, which: int) -> torch.Tensor:
    grad, other = x
    shape = a["input_shape"] if which == 0 else a["weight_shape"]
    missing = torch.empty(shape, dtype=grad.dtype, device=grad.device)
    data, weight = (missing, other) if which == 0 else (other, missing)
    mask = [which == 0, which == 1, False]
    result: torch.Tensor = torch.ops.aten.convolution_backward(
        grad, data, weight, None, *_conv_args(a), mask)[which]
    return result


def _check(types: Sequence[TensorType], attrs: Attrs, shape_key: str | None) -> None:
    rank = types[0].rank
    if rank not in (3, 4):
        raise OpTypeError(f"convolution takes [N, C, L] or [N, C, H, W] tensors, got {types[0]}")
    check_spatial(attrs, ("stride", "padding", "dilation"), rank - 2)
    if not is_int(attrs["groups"]) or attrs["groups"] < 1:
        raise OpTypeError(f"groups must be a positive int, not {attrs['groups']!r}")
    if shape_key is not None and len(check_shape(attrs[shape_key], shape_key)) != rank:
        raise OpTypeError(f"{shape_key} must have {rank} dims, not {attrs[shape_key]!r}")


def _conv_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check(types, attrs, None)
    return meta_rule("conv", _conv, types, attrs)


def _input_grad_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check(types, attrs, "input_shape")
    return meta_rule("conv_input_grad", lambda x, a: _backward(x, a, 0), types, attrs)


def _weight_grad_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check(types, attrs, "weight_shape")
    return meta_rule("conv_weight_grad", lambda x, a: _backward(x, a, 1), types, attrs)


def _per_window(weight_shape: Sequence[int]) -> int:
    # Multiply-adds per output value: (C_in / groups) * prod(kernel).
    return math.prod(weight_shape[1:])


register(
    "conv", "matmul", 2, CONV_ATTRS, _conv_rule, _conv,
    lambda types, attrs, result: 2 * result.numel * _per_window(types[1].shape), _conv_inline,
)  # fmt: skip


register(
    "conv_input_grad", "matmul", 2, CONV_ATTRS + ("input_shape",), _input_grad_rule,
    lambda x, a: _backward(x, a, 0),
    lambda types, attrs, result: 2 * types[0].numel * _per_window(types[1].shape),
)  # fmt: skip


register(
    "conv_weight_grad", "matmul", 2, CONV_ATTRS + ("weight_shape",), _weight_grad_rule,
    lambda x, a: _backward(x, a, 1),
    lambda types, attrs, result: 2 * types[0].numel * _per_window(result.shape),
)  # fmt: skip
