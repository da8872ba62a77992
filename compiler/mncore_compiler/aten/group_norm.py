"""Handler of ``aten.native_group_norm`` (``nn.GroupNorm``); its backward through torch's own
decomposition.

The handler follows torch's CPU kernel (``GroupNormKernelImpl``): per sample and group,
``mean = sum(x) / n`` and ``rstd = 1 / sqrt(sum((x - mean)^2) / n + eps)`` over the group's
``C / G * HxW`` values; the output is ``x * a + b`` per sample and channel, with
``a = rstd * weight`` and ``b = bias - mean * a``. It returns ``(out, mean, rstd)``, the last
two ``[N, G]``, as torch does, for the backward to read.
"""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__: list[str] = []

decompose("native_group_norm_backward.default")


@on("native_group_norm.default")
def _native_group_norm(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str, str]:
    x = tensor_arg(n, a["input"])
    shape = b.type(x).shape
    batch, channels, groups = int(a["N"]), int(a["C"]), int(a["group"])
    if len(shape) < 2 or groups < 1 or channels % groups:
        raise unsupported(n, f"{groups} groups of an input of shape {list(shape)}")
    count = channels // groups * int(a["HxW"])
    grouped = b.emit("reshape", [x], shape=(batch, groups, count))
    total = b.emit("sum", [grouped], dims=(2,), keepdim=False)
    mean = b.emit("div_scalar", [total], scalar=float(count), reverse=False)
    per_group = (batch, groups, 1)
    centered = b.emit("sub", [grouped, b.emit("reshape", [mean], shape=per_group)])
    var_sum = b.emit("sum", [b.emit("mul", [centered, centered])], dims=(2,), keepdim=False)
    variance = b.emit("div_scalar", [var_sum], scalar=float(count), reverse=False)
    shifted = b.emit("add_scalar", [variance], scalar=float(a["eps"]))
    rstd = b.emit("reciprocal", [b.emit("sqrt", [shifted])])
    # Per sample and channel: scale = rstd * weight, shift = bias - mean * scale.
    per_channel = (batch, groups, channels // groups)
    scale = b.emit("expand", [b.emit("reshape", [rstd], shape=per_group)], shape=per_channel)
    if a["weight"] is not None:
        weight = tensor_arg(n, a["weight"])
        scale = b.emit("mul", [scale, b.emit("reshape", [weight], shape=per_channel[1:])])
    shift = b.emit("neg", [b.emit("mul", [b.emit("reshape", [mean], shape=per_group), scale])])
    if a["bias"] is not None:
        bias = tensor_arg(n, a["bias"])
        shift = b.emit("add", [shift, b.emit("reshape", [bias], shape=per_channel[1:])])
    view = (batch, channels) + (1,) * (len(shape) - 2)
    scaled = b.emit("mul", [x, b.emit("reshape", [scale], shape=view)])
    return b.emit("add", [scaled, b.emit("reshape", [shift], shape=view)]), mean, rstd
