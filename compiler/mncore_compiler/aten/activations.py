"""Handlers of the activations timm's model families use, and of the backward ops autograd
emits for them: ``hardswish``, ``hardsigmoid``, ``hardtanh`` (and ``relu6``, which traces
to it), ``leaky_relu``, ``elu``, ``mish``, each onto the IR op of the same kernel
(``hardtanh`` onto ``clamp``; ``celu`` onto ``elu``, as torch computes it).

In-place forms (``hardswish_``, ``elu_``, ...) need no handler here: capture translates them
with the functional form's handler and stores the result back. ``silu_`` is the exception:
``silu`` is captured through torch's decomposition (``x * sigmoid(x)``), so its in-place form
is decomposed too. ``softplus`` (Mamba's time step) and its backward are captured through
torch's decompositions (``log1p(exp(beta * x)) / beta`` below the threshold, ``x`` above).
"""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import scalar_arg, tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__: list[str] = []


decompose("silu_.default", "softplus.default", "softplus_backward.default")


@on("hardswish.default", "hardsigmoid.default", "mish.default")
def _unary(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    op = str(n.target).split(".")[1].removesuffix("_")
    return b.emit(op, [tensor_arg(n, a["self"])])


@on("hardswish_backward.default", "hardsigmoid_backward.default", "mish_backward.default")
def _unary_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    op = str(n.target).split(".")[1].removesuffix("_")
    return b.emit(op, [tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])])


@on("hardtanh.default")
def _hardtanh(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch's hardtanh is clamp(x, min_val, max_val), to the bit.
    x = tensor_arg(n, a["self"])
    return b.emit("clamp", [x], min=scalar_arg(n, a["min_val"]), max=scalar_arg(n, a["max_val"]))


@on("hardtanh_backward.default")
def _hardtanh_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])]
    return b.emit("hardtanh_backward", operands, min=scalar_arg(n, a["min_val"]),
                  max=scalar_arg(n, a["max_val"]))


@on("leaky_relu.default")
def _leaky_relu(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("leaky_relu", [tensor_arg(n, a["self"])],
                  negative_slope=scalar_arg(n, a["negative_slope"]))


@on("leaky_relu_backward.default")
def _leaky_relu_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self"])]
    return b.emit("leaky_relu_backward", operands,
                  negative_slope=scalar_arg(n, a["negative_slope"]),
                  self_is_result=bool(a["self_is_result"]))


def _elu_attrs(n: fx.Node, a: dict[str, Any]) -> dict[str, float]:
    return {k: scalar_arg(n, a[k]) for k in ("alpha", "scale", "input_scale")}


@on("elu.default")
def _elu(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("elu", [tensor_arg(n, a["self"])], **_elu_attrs(n, a))


@on("elu_backward.default")
def _elu_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a["grad_output"]), tensor_arg(n, a["self_or_result"])]
    return b.emit("elu_backward", operands, is_result=bool(a["is_result"]), **_elu_attrs(n, a))


@on("celu.default")
def _celu(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch computes celu as elu(x, alpha, scale=1, input_scale=1/alpha); so does its backward.
    alpha = scalar_arg(n, a["alpha"])
    if alpha == 0:
        raise unsupported(n, "alpha=0 (torch refuses it: ZeroDivisionError)")
    return b.emit("elu", [tensor_arg(n, a["self"])], alpha=alpha, scale=1.0,
                  input_scale=1.0 / alpha)
