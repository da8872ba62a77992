"""Handlers of layer normalisation: ``native_layer_norm``; its backward through torch's
decomposition.

The forward follows torch's CPU kernel: over the trailing normalised dims,
``mean = sum(x) / n``, ``var = sum((x - mean)^2) / n`` (biased), ``rstd = 1 / sqrt(var + eps)``,
``y = (x - mean) * rstd * weight + bias``; ``mean`` and ``rstd`` keep the normalised dims as
size 1, as torch returns them for the backward.
"""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__: list[str] = []


decompose("native_layer_norm_backward.default")


@on("native_layer_norm.default")
def _native_layer_norm(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str, str]:
    x = tensor_arg(n, a["input"])
    shape = b.type(x).shape
    normalized = tuple(int(d) for d in a["normalized_shape"])
    axis = len(shape) - len(normalized)
    if axis < 0 or shape[axis:] != normalized:
        raise unsupported(n, f"normalized_shape={list(normalized)} for an input {list(shape)}")
    dims = tuple(range(axis, len(shape)))
    count = 1
    for d in normalized:
        count *= d
    total = b.emit("sum", [x], dims=dims, keepdim=True)
    mean = b.emit("div_scalar", [total], scalar=float(count), reverse=False)
    centered = b.emit("sub", [x, mean])
    var_sum = b.emit("sum", [b.emit("mul", [centered, centered])], dims=dims, keepdim=True)
    var = b.emit("div_scalar", [var_sum], scalar=float(count), reverse=False)
    shifted = b.emit("add_scalar", [var], scalar=float(a["eps"]))
    rstd = b.emit("reciprocal", [b.emit("sqrt", [shifted])])
    out = b.emit("mul", [centered, rstd])
    if a["weight"] is not None:
        out = b.emit("mul", [out, tensor_arg(n, a["weight"])])
    if a["bias"] is not None:
        out = b.emit("add", [out, tensor_arg(n, a["bias"])])
    return out, mean, rstd
