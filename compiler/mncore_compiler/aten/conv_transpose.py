"""Transposed convolution (``nn.ConvTranspose1d`` / ``ConvTranspose2d``: ``aten.convolution``
and ``aten.convolution_backward`` with ``transposed=True``), as the convolution ops it is the
adjoint of.

A transposed convolution of ``x [N, C_in, *L]`` by ``w [C_in, C_out / groups, *k]`` is the
input gradient of the ordinary convolution (same stride, padding, dilation, groups) that maps a
``[N, C_out, *L_out]`` tensor to ``x``'s shape with the same ``w``; ``output_padding`` only
picks which ``L_out`` of those the convolution's rounding maps to ``L``, so it is the
``input_shape`` torch computed. Its gradients follow from the adjoint:
``d x = conv(dy, w)`` and ``d w = conv_weight_grad(x, dy)`` (the weight gradient of that
convolution on input ``dy`` with output gradient ``x``), ``d bias = sum(dy)``.

:mod:`.conv` hands ``transposed=True`` calls to these functions.
"""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import out_shape, tensor_arg, unsupported
from .registry import Builder, Unavailable

__all__ = ["transposed_convolution", "transposed_convolution_backward"]


def _check_output_padding(n: fx.Node, a: dict[str, Any], attrs: dict[str, Any]) -> None:
    # torch accepts output_padding < stride or < dilation; only the first is a shape the
    # adjoint convolution maps back onto the input (with padding >= stride it would map to
    # one more position).
    spatial = len(attrs["stride"])
    pad = [int(p) for p in a["output_padding"]]
    pad = pad * spatial if len(pad) == 1 else pad
    if any(p >= s for p, s in zip(pad, attrs["stride"], strict=True)):
        raise unsupported(n, f"output_padding={pad} not smaller than stride="
                             f"{list(attrs['stride'])} (only output_padding < stride is)")


def transposed_convolution(b: Builder, a: dict[str, Any], n: fx.Node,
                           attrs: dict[str, Any]) -> str:
    """``aten.convolution(..., transposed=True)``; ``attrs`` as :mod:`.conv` reads them."""
    _check_output_padding(n, a, attrs)
    x, w = tensor_arg(n, a["input"]), tensor_arg(n, a["weight"])
    out = b.emit("conv_input_grad", [x, w], input_shape=out_shape(n), **attrs)
    if a["bias"] is None:
        return out
    bias = tensor_arg(n, a["bias"])
    channels = b.type(bias).shape[0]
    view = b.emit("reshape", [bias], shape=(1, channels) + (1,) * (b.type(x).rank - 2))
    return b.emit("add", [out, view])


def transposed_convolution_backward(b: Builder, a: dict[str, Any], n: fx.Node,
                                    attrs: dict[str, Any]) -> tuple[Any, ...]:
    """``aten.convolution_backward(..., transposed=True)``: (d input, d weight, d bias)."""
    _check_output_padding(n, a, attrs)
    dy = tensor_arg(n, a["grad_output"])
    x, w = tensor_arg(n, a["input"]), tensor_arg(n, a["weight"])
    rank = b.type(x).rank
    mask = [bool(m) for m in a["output_mask"]]
    missing = Unavailable(f"{n.name}: a gradient convolution_backward was not asked for")
    grads: list[Any] = [missing, missing, missing]
    if mask[0]:
        grads[0] = b.emit("conv", [dy, w], **attrs)
    if mask[1]:
        grads[1] = b.emit("conv_weight_grad", [x, dy], weight_shape=b.type(w).shape, **attrs)
    if mask[2]:
        grads[2] = b.emit("sum", [dy], dims=(0,) + tuple(range(2, rank)), keepdim=False)
    return tuple(grads)
