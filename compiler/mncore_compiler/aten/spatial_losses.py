"""Handlers of ``nll_loss2d`` and its backward: ``cross_entropy`` / ``nll_loss`` over
``[N, C, H, W]`` log-probabilities with ``[N, H, W]`` targets (per-pixel classification, as a
segmentation network's loss).

Forward: the class axis is moved last and the pixels flattened, ``[N * H * W, C]``, so the
loss is the IR's ``nll_loss`` over rows (its mean divides by the pixels not ignored, as
torch's); ``reduction="none"`` reshapes the per-pixel losses back to ``[N, H, W]``.
Backward: ``-grad`` (divided by the counted pixels for a mean) where the class is the pixel's
target and the target is not ``ignore_index``, 0 elsewhere.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from ..ops import NLL_REDUCTIONS
from .args import tensor_arg, unsupported
from .registry import Builder, Deferred, on

__all__: list[str] = []

_MEAN, _SUM = 1, 2


def _operands(b: Builder, a: dict[str, Any], n: fx.Node, key: str) -> tuple[str, str]:
    if a.get("weight") is not None:
        raise unsupported(n, "class weights (weight=...)")
    logp, target = tensor_arg(n, a[key]), tensor_arg(n, a["target"])
    if b.type(target).dtype != "int64":
        raise unsupported(n, f"{b.type(target).dtype} targets (give int64 class indices)")
    if b.type(logp).rank != 4:
        raise unsupported(n, f"log-probabilities {b.type(logp)} (nll_loss2d takes [N, C, H, W])")
    return logp, target


@on("nll_loss2d_forward.default")
def _nll_loss2d(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    logp, target = _operands(b, a, n, "self")
    batch, classes, height, width = b.type(logp).shape
    rows = b.emit("reshape", [b.emit("permute", [logp], dims=(0, 2, 3, 1))],
                  shape=(batch * height * width, classes))
    flat = b.emit("reshape", [target], shape=(batch * height * width,))
    ignore = int(a["ignore_index"])
    reduction = NLL_REDUCTIONS[int(a["reduction"])]
    loss = b.emit("nll_loss", [rows, flat], reduction=reduction, ignore_index=ignore)
    if reduction == "none":
        loss = b.emit("reshape", [loss], shape=(batch, height, width))

    def total_weight() -> str:
        counted = b.emit("cast", [b.emit("ne_scalar", [target], scalar=ignore)],
                         dtype=b.type(logp).dtype)
        return b.emit("sum", [counted], dims=(0, 1, 2), keepdim=False)

    return loss, Deferred(total_weight)


@on("nll_loss2d_backward.default")
def _nll_loss2d_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    logp, target = _operands(b, a, n, "self")
    grad = tensor_arg(n, a["grad_output"])
    batch, classes, height, width = b.type(logp).shape
    ids = torch.arange(classes, dtype=torch.int64)
    ignore = int(a["ignore_index"])
    if 0 <= ignore < classes:  # never matches: the ignored class gets no gradient
        ids[ignore] = -1
    ids_name = b.constant(ids.reshape(1, classes, 1, 1), f"{n.name}_classes")
    pixel = b.emit("reshape", [target], shape=(batch, 1, height, width))
    hot = b.emit("cast", [b.emit("eq", [pixel, ids_name])], dtype=b.type(logp).dtype)
    scale = b.emit("neg", [grad])
    reduction = int(a["reduction"])
    if reduction == _MEAN:
        scale = b.emit("div", [scale, tensor_arg(n, a["total_weight"])])
    elif reduction != _SUM:
        scale = b.emit("reshape", [scale], shape=(batch, 1, height, width))
    return b.emit("mul", [hot, scale])
