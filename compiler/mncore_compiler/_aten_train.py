"""Aten handlers of a training step: autograd's backward ops, losses and their backward, the
optimizers' update ops, and the in-place ops whose new value the functionaliser stores.

Each decomposes into IR ops in the order torch's CPU kernel computes, so that the device's
result matches torch's. The handler of an in-place op (``zero_``, ``fill_``, ``copy_``)
returns the *new value* of the tensor it writes; :mod:`mncore_compiler.functionalize` does the
write. In-place ops without a handler of their own (``mul_``, ``add_``, ``addcmul_``,
``lerp_``, ...) use the handler of their functional form.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import fx

from ._aten import HANDLERS, _Builder, _norm_dim, _norm_dims, _on, _scalar, _tensor, _unsupported

__all__: list[str] = []


def _val(node: fx.Node) -> torch.Tensor:
    return node.meta["val"]


def _filled(b: _Builder, n: fx.Node, value: float) -> str:
    val = _val(n)
    return b.constant(torch.full(tuple(val.shape), value, dtype=val.dtype), n.name)


def _scalar_constant(b: _Builder, n: fx.Node, value: float, like: str) -> str:
    """A 0-d constant of ``like``'s dtype (an operand of ``where``)."""
    return b.constant(torch.tensor(value, dtype=b.type(like).torch_dtype), f"{n.name}_scalar")


# -- factories of a tensor's shape --------------------------------------------------------------


@_on("ones_like.default", "new_ones.default")
def _ones_like(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 1)


@_on("zeros_like.default", "empty_like.default", "new_zeros.default", "new_empty.default",
     "zero.default")
def _zeros_like(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 0)


@_on("full_like.default", "new_full.default")
def _full_like(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, _scalar(n, a["fill_value"]))


# -- in-place writes: the value written ---------------------------------------------------------


@_on("zero_.default")
def _zero_(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 0)


@_on("fill_.Scalar")
def _fill_scalar(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, _scalar(n, a["value"]))


@_on("fill_.Tensor", "copy_.default")
def _copy_(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # The converter casts and broadcasts the source to the destination's type.
    return _tensor(n, a["value"] if "value" in a else a["src"])


# -- losses -------------------------------------------------------------------------------------

_MEAN, _SUM = 1, 2


@_on("mse_loss.default")
def _mse_loss(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, target = _tensor(n, a["self"]), _tensor(n, a["target"])
    diff = b.emit("sub", [x, target])
    square = b.emit("mul", [diff, diff])
    reduction = int(a["reduction"])
    if reduction not in (_MEAN, _SUM):
        return square
    dims = _norm_dims(None, b.type(square).rank)
    return b.emit("mean" if reduction == _MEAN else "sum", [square], dims=dims, keepdim=False)


@_on("mse_loss_backward.default")
def _mse_loss_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch: norm * (input - target) * grad_output, norm = 2 / numel for a mean, else 2.
    grad, x = _tensor(n, a["grad_output"]), _tensor(n, a["self"])
    diff = b.emit("sub", [x, _tensor(n, a["target"])])
    norm = 2.0 / b.type(x).numel if int(a["reduction"]) == _MEAN else 2.0
    return b.emit("mul", [b.emit("mul_scalar", [diff], scalar=norm), grad])


@_on("nll_loss_backward.default")
def _nll_loss_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # d loss / d logp[i, c] = -(grad / total_weight for a mean, else grad) where c == target[i]
    # and target[i] != ignore_index; 0 elsewhere.
    if a.get("weight") is not None:
        raise _unsupported(n, "class weights (weight=...)")
    grad, logp = _tensor(n, a["grad_output"]), _tensor(n, a["self"])
    target = _tensor(n, a["target"])
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
        scale = b.emit("div", [scale, _tensor(n, a["total_weight"])])
    elif reduction != _SUM and ltype.rank == 2:
        scale = b.emit("reshape", [scale], shape=(ltype.shape[0], 1))
    return b.emit("mul", [hot, scale])


# -- activations and softmax backward -----------------------------------------------------------


@_on("threshold_backward.default")
def _threshold_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, x = _tensor(n, a["grad_output"]), _tensor(n, a["self"])
    below = b.emit("le_scalar", [x], scalar=_scalar(n, a["threshold"]))
    return b.emit("where", [below, _scalar_constant(b, n, 0.0, grad), grad])


@_on("sigmoid_backward.default")
def _sigmoid_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, out = _tensor(n, a["grad_output"]), _tensor(n, a["output"])
    one_minus = b.emit("sub_scalar", [out], scalar=1.0, reverse=True)
    return b.emit("mul", [b.emit("mul", [grad, one_minus]), out])


@_on("tanh_backward.default")
def _tanh_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad, out = _tensor(n, a["grad_output"]), _tensor(n, a["output"])
    square = b.emit("mul", [out, out])
    return b.emit("mul", [grad, b.emit("sub_scalar", [square], scalar=1.0, reverse=True)])


def _softmax_sum(b: _Builder, n: fx.Node, x: str, dim: Any) -> str:
    return b.emit("sum", [x], dims=(_norm_dim(dim, b.type(x).rank),), keepdim=True)


@_on("_log_softmax_backward_data.default")
def _log_softmax_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # grad - exp(output) * sum(grad, dim)
    grad, out = _tensor(n, a["grad_output"]), _tensor(n, a["output"])
    total = _softmax_sum(b, n, grad, a["dim"])
    return b.emit("sub", [grad, b.emit("mul", [b.emit("exp", [out]), total])])


@_on("_softmax_backward_data.default")
def _softmax_backward(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # output * (grad - sum(grad * output, dim))
    grad, out = _tensor(n, a["grad_output"]), _tensor(n, a["output"])
    total = _softmax_sum(b, n, b.emit("mul", [grad, out]), a["dim"])
    return b.emit("mul", [out, b.emit("sub", [grad, total])])


# -- optimizer update ops -----------------------------------------------------------------------


def _scaled(b: _Builder, x: str, value: float) -> str:
    return x if value == 1 else b.emit("mul_scalar", [x], scalar=value)


@_on("addcmul.default")
def _addcmul(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # self + value * tensor1 * tensor2, as torch's kernel groups it
    x, t1, t2 = (_tensor(n, a[k]) for k in ("self", "tensor1", "tensor2"))
    product = b.emit("mul", [_scaled(b, t1, _scalar(n, a["value"])), t2])
    return b.emit("add", [x, product])


@_on("addcdiv.default")
def _addcdiv(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # self + value * tensor1 / tensor2
    x, t1, t2 = (_tensor(n, a[k]) for k in ("self", "tensor1", "tensor2"))
    quotient = b.emit("div", [_scaled(b, t1, _scalar(n, a["value"])), t2])
    return b.emit("add", [x, quotient])


@_on("lerp.Scalar")
def _lerp_scalar(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch: |w| < 0.5 ? self + w * (end - self) : end - (end - self) * (1 - w), in float32
    x, end = _tensor(n, a["self"]), _tensor(n, a["end"])
    weight = np.float32(_scalar(n, a["weight"]))
    diff = b.emit("sub", [end, x])
    if abs(weight) < 0.5:
        return b.emit("add", [x, b.emit("mul_scalar", [diff], scalar=float(weight))])
    rest = float(np.float32(1) - weight)
    return b.emit("sub", [end, b.emit("mul_scalar", [diff], scalar=rest)])


@_on("lerp.Tensor")
def _lerp_tensor(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, end, weight = (_tensor(n, a[k]) for k in ("self", "end", "weight"))
    diff = b.emit("sub", [end, x])
    low = b.emit("add", [x, b.emit("mul", [weight, diff])])
    rest = b.emit("sub_scalar", [weight], scalar=1.0, reverse=True)
    high = b.emit("sub", [end, b.emit("mul", [diff, rest])])
    small = b.emit("lt_scalar", [b.emit("abs", [weight])], scalar=0.5)
    return b.emit("where", [small, low, high])


@_on("maximum.default", "minimum.default")
def _extremum(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    op = "maximum" if "maximum" in str(n.target) else "minimum"
    return b.emit(op, [_tensor(n, a["self"]), _tensor(n, a["other"])])


# The handlers' table, for readers who grep for an op.
TRAINING_OPS = sorted(k for k in HANDLERS if k.endswith(("_backward.default", "_data.default")))
