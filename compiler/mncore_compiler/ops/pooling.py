"""Pooling windows and nearest upsampling over the last two (upsampling: one or two) dims.

Each op is the aten kernel of the same name, 2-d as torch traces it (a 1-d pool arrives as the
2-d one over a unit dim): ``max_pool`` and ``max_pool_indices`` (the two results of
``max_pool2d_with_indices``; the indices are int64 offsets into each plane), ``avg_pool``,
``adaptive_avg_pool``, ``upsample_nearest``, and the backward of each. The type rules ask
torch's meta kernels for the shape after checking the attributes.

FLOPs: one per window element read (``prod(kernel)`` per output of a pool), one per gradient
element scattered back, none for upsampling (a copy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..types import TensorType
from .conv import check_spatial, meta_rule
from .registry import Attrs, OpTypeError, register
from .rules import check_shape, is_int, no_flops, per_input, per_output

__all__: list[str] = []

_MAX_ATTRS = ("kernel", "stride", "padding", "dilation", "ceil_mode")
_AVG_ATTRS = ("kernel", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


def _empty(shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
    # The backward kernels read only the input's shape.
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)


def _check_pool(types: Sequence[TensorType], attrs: Attrs) -> None:
    if types[0].rank not in (3, 4):
        raise OpTypeError(f"2-d pooling takes [C, H, W] or [N, C, H, W] tensors, got {types[0]}")
    keys = [k for k in ("kernel", "stride", "padding", "dilation") if k in attrs]
    check_spatial(attrs, keys, 2)
    for key in ("ceil_mode", "count_include_pad"):
        if key in attrs and not isinstance(attrs[key], bool):
            raise OpTypeError(f"{key} must be a bool, not {attrs[key]!r}")
    divisor = attrs.get("divisor_override")
    if divisor is not None and not (is_int(divisor) and divisor > 0):
        raise OpTypeError(f"divisor_override must be None or a positive int, not {divisor!r}")
    if "input_shape" in attrs and len(check_shape(attrs["input_shape"])) != types[0].rank:
        raise OpTypeError(f"input_shape must have {types[0].rank} dims, "
                          f"not {attrs['input_shape']!r}")


def _max_args(a: Attrs) -> tuple[Any, ...]:
    return (list(a["kernel"]), list(a["stride"]), list(a["padding"]), list(a["dilation"]),
            a["ceil_mode"])


def _avg_args(a: Attrs) -> tuple[Any, ...]:
    return (list(a["kernel"]), list(a["stride"]), list(a["padding"]), a["ceil_mode"],
            a["count_include_pad"], a["divisor_override"])


def _max_pool(x: Sequence[torch.Tensor], a: Attrs, which: int) -> torch.Tensor:
    result: torch.Tensor = torch.ops.aten.max_pool2d_with_indices(x[0], *_max_args(a))[which]
    return result


def _max_pool_backward(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    grad, data, indices = x
    return torch.ops.aten.max_pool2d_with_indices_backward(grad, data, *_max_args(a), indices)


def _avg_pool_backward(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.ops.aten.avg_pool2d_backward(x[0], _empty(a["input_shape"], x[0]), *_avg_args(a))


def _pool_rule(what: str, fn: Any) -> Any:
    def rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        _check_pool(types[:1], attrs)
        if what == "max_pool_backward" and types[2].dtype != "int64":
            raise OpTypeError(f"max_pool_backward indices must be int64, not {types[2].dtype}")
        return meta_rule(what, fn, types[:2] if what == "max_pool_backward" else types, attrs)

    return rule


def _max_pool_backward_meta(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    # The meta rule sees the float operands only; the indices' shape is the gradient's.
    indices = torch.empty(x[0].shape, dtype=torch.int64, device=x[0].device)
    return _max_pool_backward([x[0], x[1], indices], a)


def _window_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return result.numel * math.prod(attrs["kernel"])


def _grad_window_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return types[0].numel * math.prod(attrs["kernel"])


register(
    "max_pool", "reduction", 1, _MAX_ATTRS,
    _pool_rule("max_pool", lambda x, a: _max_pool(x, a, 0)), lambda x, a: _max_pool(x, a, 0),
    _window_flops,
)  # fmt: skip


register(
    "max_pool_indices", "reduction", 1, _MAX_ATTRS,
    _pool_rule("max_pool_indices", lambda x, a: _max_pool(x, a, 1)),
    lambda x, a: _max_pool(x, a, 1), _window_flops,
)  # fmt: skip


register(
    "max_pool_backward", "reduction", 3, _MAX_ATTRS,
    _pool_rule("max_pool_backward", _max_pool_backward_meta), _max_pool_backward,
    per_input(1),
)  # fmt: skip


register(
    "avg_pool", "reduction", 1, _AVG_ATTRS,
    _pool_rule("avg_pool", lambda x, a: torch.ops.aten.avg_pool2d(x[0], *_avg_args(a))),
    lambda x, a: torch.ops.aten.avg_pool2d(x[0], *_avg_args(a)), _window_flops,
)  # fmt: skip


register(
    "avg_pool_backward", "reduction", 1, _AVG_ATTRS + ("input_shape",),
    _pool_rule("avg_pool_backward", _avg_pool_backward), _avg_pool_backward, _grad_window_flops,
)  # fmt: skip


# --- adaptive average pooling ------------------------------------------------------------


def _adaptive(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.ops.aten._adaptive_avg_pool2d(x[0], list(a["output_size"]))


def _adaptive_backward(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.ops.aten._adaptive_avg_pool2d_backward(x[0], _empty(a["input_shape"], x[0]))


def _adaptive_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check_pool(types, attrs)
    if "output_size" in attrs:
        size = check_shape(attrs["output_size"], "output_size")
        if len(size) != 2 or 0 in size:
            raise OpTypeError(f"output_size must be 2 positive ints, not {size!r}")
        return meta_rule("adaptive_avg_pool", _adaptive, types, attrs)
    return meta_rule("adaptive_avg_pool_backward", _adaptive_backward, types, attrs)


register(
    "adaptive_avg_pool", "reduction", 1, ("output_size",), _adaptive_rule, _adaptive,
    per_input(1),
)  # fmt: skip


register(
    "adaptive_avg_pool_backward", "reduction", 1, ("input_shape",), _adaptive_rule,
    _adaptive_backward, per_output(1),
)  # fmt: skip


# --- nearest upsampling ------------------------------------------------------------------


def _upsample(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    size, scales = list(a["output_size"]), list(a["scales"])
    fn = (torch.ops.aten.upsample_nearest1d if len(size) == 1
          else torch.ops.aten.upsample_nearest2d)
    return fn(x[0], size, *scales)


def _upsample_backward(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    size, scales = list(a["output_size"]), list(a["scales"])
    fn = (torch.ops.aten.upsample_nearest1d_backward if len(size) == 1
          else torch.ops.aten.upsample_nearest2d_backward)
    return fn(x[0], size, list(a["input_shape"]), *scales)


def _upsample_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    size = check_shape(attrs["output_size"], "output_size")
    spatial = len(size)
    if spatial not in (1, 2) or types[0].rank != spatial + 2:
        raise OpTypeError(f"upsample_nearest takes 1 or 2 output sizes for an [N, C, ...] tensor "
                          f"of rank sizes + 2, got output_size {list(size)} and {types[0]}")
    scales = attrs["scales"]
    if (not isinstance(scales, tuple) or len(scales) != spatial
            or not all(s is None or (isinstance(s, float) and s > 0) for s in scales)):
        raise OpTypeError(f"scales must be {spatial} positive floats or None, not {scales!r}")
    if "input_shape" in attrs:
        if len(check_shape(attrs["input_shape"])) != types[0].rank:
            raise OpTypeError(f"input_shape must have {types[0].rank} dims, "
                              f"not {attrs['input_shape']!r}")
        return meta_rule("upsample_nearest_backward", _upsample_backward, types, attrs)
    return meta_rule("upsample_nearest", _upsample, types, attrs)


register(
    "upsample_nearest", "layout", 1, ("output_size", "scales"), _upsample_rule, _upsample,
    no_flops,
)  # fmt: skip


register(
    "upsample_nearest_backward", "reduction", 1, ("output_size", "scales", "input_shape"),
    _upsample_rule, _upsample_backward, per_input(1),
)  # fmt: skip
