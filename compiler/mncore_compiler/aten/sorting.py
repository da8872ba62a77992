"""Handlers of sorting and reordering: ``sort``, ``topk`` (``argsort`` through torch's
decomposition), ``flip``, ``histc``, and transformers' grouped expert matmul
(``transformers.grouped_mm_fallback``, the custom op its mixture-of-experts layers call when
traced) with its backward."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import norm_dim, scalar_arg, tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__: list[str] = []


decompose("argsort.default", "argsort.stable")


def _sorted(b: Builder, n: fx.Node, x: str, dim: int, descending: bool) -> tuple[str, str]:
    """``(values, indices)`` of ``x`` sorted along ``dim``; equal values keep their order."""
    if b.type(x).rank == 0:
        x = b.emit("reshape", [x], shape=(1,))
    indices = b.emit("argsort", [x], dim=dim, descending=descending)
    values = b.emit("gather", [x, indices], dim=dim)
    return values, indices


def _scalar_shaped(b: Builder, n: fx.Node, pair: tuple[str, str]) -> tuple[str, str]:
    # A 0-d tensor's sort is itself and index 0: reshaped back to 0-d.
    shape = tuple(int(d) for d in n.meta["val"][0].shape)
    if b.type(pair[0]).shape == shape:
        return pair
    return tuple(b.emit("reshape", [v], shape=shape) for v in pair)  # type: ignore[return-value]


@on("sort.default", "sort.stable")
def _sort(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
    x = tensor_arg(n, a["self"])
    dim = norm_dim(int(a.get("dim", -1)), b.type(x).rank)
    return _scalar_shaped(b, n, _sorted(b, n, x, dim, bool(a.get("descending", False))))


@on("topk.default")
def _topk(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
    # sorted=False may give any order: the sorted one is one of them.
    x = tensor_arg(n, a["self"])
    dim = norm_dim(int(a.get("dim", -1)), b.type(x).rank)
    k = int(a["k"])
    values, indices = _sorted(b, n, x, dim, bool(a.get("largest", True)))
    if b.type(values).shape[dim] != k:
        values = b.emit("slice", [values], dim=dim, start=0, end=k, step=1)
        indices = b.emit("slice", [indices], dim=dim, start=0, end=k, step=1)
    return _scalar_shaped(b, n, (values, indices))


@on("flip.default")
def _flip(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # One index_select of the reversed positions per flipped dim (cumsum's backward flips).
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    for dim in sorted({norm_dim(int(d), len(shape)) for d in a["dims"]}):
        if shape[dim] > 1:
            index = b.constant(torch.arange(shape[dim] - 1, -1, -1), f"{n.name}_index")
            x = b.emit("index_select", [x, index], dim=dim)
    return x


@on("histc.default")
def _histc(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    low, high = scalar_arg(n, a.get("min", 0)), scalar_arg(n, a.get("max", 0))
    if low > high:
        raise unsupported(n, f"min={low} > max={high}")
    return b.emit("histc", [x], bins=int(a.get("bins", 100)), min=low, max=high)


@on("grouped_mm_fallback.default", namespace="transformers")
def _grouped_mm(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, weight, offsets = (tensor_arg(n, a[k]) for k in ("input", "weight", "offs"))
    return b.emit("grouped_mm", [x, weight, offsets])


@on("grouped_mm_fallback_backward.default", namespace="transformers")
def _grouped_mm_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
    # d input = grad @ weight[g].T per group, d weight[g] = input[rows of g].T @ grad[rows of g].
    x, weight, offsets, grad = (tensor_arg(n, a[k])
                                for k in ("input", "weight", "offs", "grad_output"))
    transposed = b.emit("permute", [weight], dims=(0, 2, 1))
    grad_input = b.emit("grouped_mm", [grad, transposed, offsets])
    grad_weight = b.emit("grouped_mm_weight_grad", [x, grad, offsets])
    return grad_input, grad_weight
