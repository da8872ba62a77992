"""Handlers of losses and their backward: ``nll_loss`` (what ``cross_entropy`` becomes after
``_log_softmax``) and ``mse_loss``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from ..ops import NLL_REDUCTIONS
from .args import norm_dims, tensor_arg, unsupported
from .registry import Builder, Deferred, on

__all__: list[str] = []


@on("nll_loss_forward.default")
def _nll_loss(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    if a.get("weight") is not None:
        raise unsupported(n, "class weights (weight=...)")
    logp, target = tensor_arg(n, a["self"]), tensor_arg(n, a["target"])
    if b.type(target).dtype != "int64":
        raise unsupported(n, f"{b.type(target).dtype} targets (give int64 class indices)")
    ignore = int(a["ignore_index"])
    loss = b.emit("nll_loss", [logp, target], reduction=NLL_REDUCTIONS[int(a["reduction"])],
                  ignore_index=ignore)

    def total_weight() -> str:
        # How many targets are not ignored: nll_loss_backward divides by it for a mean.
        counted = b.emit("cast", [b.emit("ne_scalar", [target], scalar=ignore)],
                         dtype=b.type(logp).dtype)
        dims = tuple(range(b.type(counted).rank))
        return b.emit("sum", [counted], dims=dims, keepdim=False)

    return loss, Deferred(total_weight)


_MEAN, _SUM = 1, 2


@on("mse_loss.default")
def _mse_loss(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, target = tensor_arg(n, a["self"]), tensor_arg(n, a["target"])
    diff = b.emit("sub", [x, target])
    square = b.emit("mul", [diff, diff])
    reduction = int(a["reduction"])
    if reduction not in (_MEAN, _SUM):
        return square
    dims = norm_dims(None, b.type(square).rank)
    return b.emit("mean" if reduction == _MEAN else "sum", [square], dims=dims, keepdim=False)


@on("mse_loss_backward.default")
def _mse_loss_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch: norm * (input - target) * grad_output, norm = 2 / numel for a mean, else 2.
    grad, x = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])
    diff = b.emit("sub", [x, tensor_arg(n, a["target"])])
    norm = 2.0 / b.type(x).numel if int(a["reduction"]) == _MEAN else 2.0
    return b.emit("mul", [b.emit("mul_scalar", [diff], scalar=norm), grad])


@on("nll_loss_backward.default")
def _nll_loss_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # d loss / d logp[i, c] = -(grad / total_weight for a mean, else grad) where c == target[i]
    # and target[i] != ignore_index; 0 elsewhere.
    if a.get("weight") is not None:
        raise unsupported(n, "class weights (weight=...)")
    grad, logp = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])
    target = tensor_arg(n, a["target"])
    ltype = b.type(logp)
    classes = torch.arange(ltype.shape[-1], dtype=torch.int64)
    ignore = int(a["ignore_index"])
    if 0 <= ignore < len(classes):  # never matches: the ignored class gets no gradient
        classes[ignore] = -1
    if ltype.rank == 2:
        target = b.emit("reshape", [target], shape=(ltype.shape[0], 1))
    hot = b.emit("eq", [target, b.constant(classes, f"{n.name}_classes")])
    hot = b.emit("cast", [hot], dtype=ltype.dtype)
    reduction = int(a["reduction"])
    scale = b.emit("neg", [grad])
    if reduction == _MEAN:
        scale = b.emit("div", [scale, tensor_arg(n, a["total_weight"])])
    elif reduction != _SUM and ltype.rank == 2:
        scale = b.emit("reshape", [scale], shape=(ltype.shape[0], 1))
    return b.emit("mul", [hot, scale])
