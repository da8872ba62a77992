"""Handlers of autograd's backward ops: activations' and softmax's.

Each decomposes into IR ops in the order torch's CPU kernel computes, so that the device's
result matches torch's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import norm_dim, scalar_arg, tensor_arg
from .registry import Builder, on

__all__: list[str] = []


def _scalar_constant(b: Builder, n: fx.Node, value: float, like: str) -> str:
    """A 0-d constant of ``like``'s dtype (an operand of ``where``)."""
    return b.constant(torch.tensor(value, dtype=b.type(like).torch_dtype), f"{n.name}_scalar")


@on("threshold_backward.default")
def _threshold_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, x = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])
    below = b.emit("le_scalar", [x], scalar=scalar_arg(n, a["threshold"]))
    return b.emit("where", [below, _scalar_constant(b, n, 0.0, grad), grad])


@on("sigmoid_backward.default")
def _sigmoid_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, out = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["output"])
    one_minus = b.emit("sub_scalar", [out], scalar=1.0, reverse=True)
    return b.emit("mul", [b.emit("mul", [grad, one_minus]), out])


@on("tanh_backward.default")
def _tanh_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, out = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["output"])
    square = b.emit("mul", [out, out])
    return b.emit("mul", [grad, b.emit("sub_scalar", [square], scalar=1.0, reverse=True)])


def _softmax_sum(b: Builder, n: fx.Node, x: str, dim: Any) -> str:
    return b.emit("sum", [x], dims=(norm_dim(dim, b.type(x).rank),), keepdim=True)


@on("_log_softmax_backward_data.default")
def _log_softmax_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # grad - exp(output) * sum(grad, dim)
    grad, out = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["output"])
    total = _softmax_sum(b, n, grad, a["dim"])
    return b.emit("sub", [grad, b.emit("mul", [b.emit("exp", [out]), total])])


@on("_softmax_backward_data.default")
def _softmax_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # output * (grad - sum(grad * output, dim))
    grad, out = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["output"])
    total = _softmax_sum(b, n, b.emit("mul", [grad, out]), a["dim"])
    return b.emit("mul", [out, b.emit("sub", [grad, total])])
