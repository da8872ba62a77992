"""Handlers of 2-d pooling (max with indices, average, adaptive average), nearest upsampling
(1-d and 2-d) and their backwards, each onto the IR op of the same kernel; bilinear 2-d
upsampling and its backward as two matmuls with constant interpolation matrices (bilinear
interpolation is separable: ``y = A_h @ x @ A_w.T``, its backward ``A_h.T @ g @ A_w``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, Deferred, on

__all__: list[str] = []


def _pair(n: fx.Node, value: Any, default: Any = None) -> tuple[int, int]:
    """A 2-d window argument as two ints: one int (or a list of one) is used for both dims, an
    empty stride means the kernel's."""
    if isinstance(value, (list, tuple)) and len(value) == 0 and default is not None:
        value = default
    items = [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
    if len(items) == 1:
        items = items * 2
    if len(items) != 2:
        raise unsupported(n, f"the window argument {value!r} (give 1 or 2 ints)")
    return items[0], items[1]


def _max_attrs(n: fx.Node, a: dict[str, Any]) -> dict[str, Any]:
    kernel = _pair(n, a["kernel_size"])
    return {"kernel": kernel, "stride": _pair(n, a["stride"], kernel),
            "padding": _pair(n, a["padding"]), "dilation": _pair(n, a["dilation"]),
            "ceil_mode": bool(a["ceil_mode"])}


def _avg_attrs(n: fx.Node, a: dict[str, Any]) -> dict[str, Any]:
    kernel = _pair(n, a["kernel_size"])
    divisor = a["divisor_override"]
    return {"kernel": kernel, "stride": _pair(n, a["stride"], kernel),
            "padding": _pair(n, a["padding"]), "ceil_mode": bool(a["ceil_mode"]),
            "count_include_pad": bool(a["count_include_pad"]),
            "divisor_override": None if divisor is None else int(divisor)}


@on("max_pool2d_with_indices.default")
def _max_pool(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    x, attrs = tensor_arg(n, a["self"]), _max_attrs(n, a)
    # The indices are emitted only when a backward reads them (inference never does).
    return (b.emit("max_pool", [x], **attrs),
            Deferred(lambda: b.emit("max_pool_indices", [x], **attrs)))


@on("max_pool2d_with_indices_backward.default")
def _max_pool_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a[k]) for k in ("grad_output", "self", "indices")]
    return b.emit("max_pool_backward", operands, **_max_attrs(n, a))


@on("avg_pool2d.default")
def _avg_pool(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("avg_pool", [tensor_arg(n, a["self"])], **_avg_attrs(n, a))


@on("avg_pool2d_backward.default")
def _avg_pool_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    return b.emit("avg_pool_backward", [tensor_arg(n, a["grad_output"])],
                  input_shape=b.type(x).shape, **_avg_attrs(n, a))


@on("_adaptive_avg_pool2d.default")
def _adaptive(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    size = _pair(n, a["output_size"])
    return b.emit("adaptive_avg_pool", [tensor_arg(n, a["self"])], output_size=size)


@on("_adaptive_avg_pool2d_backward.default")
def _adaptive_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    return b.emit("adaptive_avg_pool_backward", [tensor_arg(n, a["grad_output"])],
                  input_shape=b.type(x).shape)


def _scales(a: dict[str, Any], keys: tuple[str, ...]) -> tuple[float | None, ...]:
    return tuple(None if a[k] is None else float(a[k]) for k in keys)


_SCALES = {1: ("scales",), 2: ("scales_h", "scales_w")}


@on("upsample_nearest1d.default", "upsample_nearest2d.default")
def _upsample(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    size = tuple(int(s) for s in a["output_size"])
    return b.emit("upsample_nearest", [tensor_arg(n, a["self"])], output_size=size,
                  scales=_scales(a, _SCALES[len(size)]))


@on("upsample_nearest1d_backward.default", "upsample_nearest2d_backward.default")
def _upsample_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    size = tuple(int(s) for s in a["output_size"])
    return b.emit("upsample_nearest_backward", [tensor_arg(n, a["grad_output"])],
                  output_size=size, input_shape=tuple(int(s) for s in a["input_size"]),
                  scales=_scales(a, _SCALES[len(size)]))


def _bilinear_matrix(size_in: int, size_out: int, align_corners: bool,
                     scale: float | None) -> torch.Tensor:
    """``A`` (size_out, size_in): row ``o`` holds the weights of the inputs output ``o``
    interpolates, as torch's bilinear kernel computes them (``UpSample.h``)."""
    weights = torch.zeros(size_out, size_in, dtype=torch.float64)
    if size_in == size_out:
        return weights.fill_diagonal_(1.0).float()
    if align_corners:
        ratio = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else size_in / size_out
    ratio = float(torch.tensor(ratio, dtype=torch.float32))  # torch computes it in float
    for o in range(size_out):
        src = ratio * o if align_corners else max(ratio * (o + 0.5) - 0.5, 0.0)
        i0 = min(int(src), size_in - 1)
        i1 = i0 + (1 if i0 < size_in - 1 else 0)
        lam = min(max(src - i0, 0.0), 1.0)
        weights[o, i0] += 1.0 - lam
        weights[o, i1] += lam
    return weights.float()


def _bilinear_matrices(b: Builder, n: fx.Node, a: dict[str, Any], size_in: tuple[int, ...],
                       dtype: torch.dtype) -> tuple[str, str]:
    size_out = tuple(int(s) for s in a["output_size"])
    if len(size_in) != 2 or len(size_out) != 2:
        raise unsupported(n, f"sizes {list(size_in)} -> {list(size_out)} (2-d only)")
    scales = _scales(a, _SCALES[2])
    rows, cols = (_bilinear_matrix(i, o, bool(a["align_corners"]), s).to(dtype)
                  for i, o, s in zip(size_in, size_out, scales, strict=True))
    return b.constant(rows, f"{n.name}_rows"), b.constant(cols, f"{n.name}_cols")


@on("upsample_bilinear2d.default")
def _upsample_bilinear(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    rows, cols = _bilinear_matrices(b, n, a, shape[-2:], b.type(x).torch_dtype)
    tall = b.emit("matmul", [rows, x])
    return b.emit("matmul", [tall, b.emit("permute", [cols], dims=(1, 0))])


@on("upsample_bilinear2d_backward.default")
def _upsample_bilinear_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad = tensor_arg(n, a["grad_output"])
    size_in = tuple(int(s) for s in a["input_size"])
    rows, cols = _bilinear_matrices(b, n, a, size_in[-2:], b.type(grad).torch_dtype)
    wide = b.emit("matmul", [b.emit("permute", [rows], dims=(1, 0)), grad])
    return b.emit("matmul", [wide, cols])
