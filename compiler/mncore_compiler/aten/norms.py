"""Handlers of norms and statistics: ``linalg_vector_norm``, ``var``, dropout at p=0, the
multi-tensor (``_foreach_*``) ops ``clip_grad_norm_`` traces to: ``_foreach_norm`` and
``_foreach_mul_`` (one IR computation per tensor of the list); weight normalization
(``nn.utils.weight_norm``, wav2vec2's positional convolution) through the kit's own
decompositions of ``_weight_norm_interface`` and its backward."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from .args import cast_to, norm_dims, scalar_arg, tensor_arg, unsupported
from .registry import Builder, decompose_as, on

__all__: list[str] = []


def _other_dims(v: torch.Tensor, dim: int) -> list[int]:
    return [d for d in range(v.dim()) if d != dim % max(v.dim(), 1)]


@decompose_as("_weight_norm_interface.default")
def _weight_norm(v: torch.Tensor, g: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
    """``w = v * g / |v|``, the norm over every dimension but ``dim``, and that norm. Not
    torch's decomposition: of a 1-d ``v`` it takes the norm of the whole vector where the kernel
    normalizes each element alone (``|v|``)."""
    dims = _other_dims(v, dim)
    norm = torch.linalg.vector_norm(v, 2, dims, keepdim=True) if dims else v.abs()
    return v * (g / norm), norm


@decompose_as("_weight_norm_interface_backward.default")
def _weight_norm_backward(grad_w: torch.Tensor, saved_v: torch.Tensor, saved_g: torch.Tensor,
                          saved_norms: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch's kernel (``weight_norm_backward`` of ``WeightNorm.cpp``) in torch ops: with
    ``w = v * g / |v|`` (the norm over every dimension but ``dim``), ``grad_g = sum(grad_w * v)
    / |v|`` and ``grad_v = g / |v| * (grad_w - v * grad_g / |v|)``."""
    dims = _other_dims(saved_v, dim)
    products = grad_w * saved_v
    # A 1-d weight normalizes each element alone (``sum`` of no dims would sum them all).
    grad_g = (products.sum(dims, keepdim=True) if dims else products) / saved_norms
    grad_v = saved_g / saved_norms * (grad_w - saved_v * (grad_g / saved_norms))
    return grad_v, grad_g.reshape(saved_g.shape)


def vector_norm(b: Builder, x: str, order: float, dims: tuple[int, ...], keepdim: bool) -> str:
    """``torch.linalg.vector_norm(x, order, dims, keepdim)`` as IR ops."""
    if order == 2:
        squares = b.emit("sum", [b.emit("mul", [x, x])], dims=dims, keepdim=keepdim)
        return b.emit("sqrt", [squares])
    magnitude = b.emit("abs", [x])
    if math.isinf(order):
        return b.emit("amax" if order > 0 else "amin", [magnitude], dims=dims, keepdim=keepdim)
    if order == 0:
        count = b.emit("sum", [b.emit("ne_scalar", [x], scalar=0.0)], dims=dims, keepdim=keepdim)
        return b.emit("cast", [count], dtype=b.type(x).dtype)
    if order == 1:
        return b.emit("sum", [magnitude], dims=dims, keepdim=keepdim)
    powered = b.emit("pow_scalar", [magnitude], scalar=order, reverse=False)
    total = b.emit("sum", [powered], dims=dims, keepdim=keepdim)
    return b.emit("pow_scalar", [total], scalar=1.0 / order, reverse=False)


@on("linalg_vector_norm.default")
def _linalg_vector_norm(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = cast_to(b, n, tensor_arg(n, a["self"]), a.get("dtype"))
    if b.type(x).dtype not in ("float32", "float16", "bfloat16"):
        raise unsupported(n, f"a {b.type(x).dtype} input (norms take float tensors)")
    dims = norm_dims(a.get("dim"), b.type(x).rank)
    return vector_norm(b, x, scalar_arg(n, a["ord"]), dims, bool(a.get("keepdim", False)))


@on("_foreach_norm.Scalar")
def _foreach_norm(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, ...]:
    order = scalar_arg(n, a["ord"])
    norms = []
    for t in a["self"]:
        x = cast_to(b, n, tensor_arg(n, t), a.get("dtype"))
        norms.append(vector_norm(b, x, order, tuple(range(b.type(x).rank)), False))
    return tuple(norms)


@on("_foreach_mul.Tensor", "_foreach_mul.Scalar")
def _foreach_mul(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, ...]:
    # The in-place form (clip_grad_norm_'s) writes each product back into its tensor.
    other = a["other"] if "other" in a else a["scalar"]
    tensors = [tensor_arg(n, t) for t in a["self"]]
    if isinstance(other, str):
        return tuple(b.emit("mul", [t, other]) for t in tensors)
    return tuple(b.emit("mul_scalar", [t], scalar=scalar_arg(n, other)) for t in tensors)


@on("var.correction")
def _var(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # sum((x - mean)^2) / (n - correction), the two-pass form torch's CPU kernel matches.
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    dims = norm_dims(a.get("dim"), len(shape))
    keepdim = bool(a.get("keepdim", False))
    correction = 1.0 if a.get("correction") is None else scalar_arg(n, a["correction"])
    count = math.prod(shape[d] for d in dims)
    mean = b.emit("mean", [x], dims=dims, keepdim=True)
    centered = b.emit("sub", [x, mean])
    total = b.emit("sum", [b.emit("mul", [centered, centered])], dims=dims, keepdim=keepdim)
    # torch gives inf or nan (0 / 0) when no degrees of freedom remain, as this division does.
    return b.emit("div_scalar", [total], scalar=max(count - correction, 0.0), reverse=False)


@on("native_dropout.default")
def _native_dropout(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
    x = tensor_arg(n, a["input"])
    if a["train"] is not False and float(a["p"]) != 0.0:
        raise unsupported(n, f"p={a['p']} in training mode (dropout is supported at p=0 or in "
                             "eval mode)")
    keep = b.constant(torch.ones(b.type(x).shape, dtype=torch.bool), f"{n.name}_mask")
    return x, keep


@on("dropout.default")
def _dropout(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["input"])
    if a["train"] and float(a["p"]) != 0.0:
        raise unsupported(n, f"p={a['p']} in training mode (dropout is supported at p=0 or in "
                             "eval mode)")
    return x


@on("all.dim", "all.dims", "all.default", "any.dim", "any.dims", "any.default")
def _all_any(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # Exact: count the true values (an int64 sum), then compare with the count or with 0.
    x = tensor_arg(n, a["self"])
    if b.type(x).dtype != "bool":
        x = b.emit("ne_scalar", [x], scalar=0)
    shape = b.type(x).shape
    dims = norm_dims(a.get("dim"), len(shape))
    count = b.emit("sum", [x], dims=dims, keepdim=bool(a.get("keepdim", False)))
    if str(n.target).startswith("aten.all"):
        return b.emit("eq_scalar", [count], scalar=math.prod(shape[d] for d in dims))
    return b.emit("gt_scalar", [count], scalar=0)
