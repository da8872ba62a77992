"""Handlers of the elementwise math beyond arithmetic: ``log``, ``sin``, ``cos``, ``erf``,
``pow``, ``clamp``, ``floor_divide``, ``floor``/``ceil``/``trunc``/``round``, bitwise and
logical ops; ``silu``, its backward and ``gelu_backward`` through torch's decompositions."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import scalar_for, tensor_arg, unsupported
from .registry import Builder, Handler, decompose, on

__all__: list[str] = []


decompose("silu.default", "silu_backward.default", "gelu_backward.default",
          "clamp_min.default", "clamp_max.default")


def _unary(op: str) -> Handler:
    return lambda b, a, n: b.emit(op, [tensor_arg(n, a["self"])])


for _op in ("log", "log1p", "sin", "cos", "erf", "bitwise_not", "floor", "ceil", "trunc",
            "round"):
    on(f"{_op}.default")(_unary(_op))


@on("pow.Tensor_Scalar")
def _pow_tensor_scalar(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    exponent = scalar_for(b, n, x, a["exponent"])
    if exponent == 1:
        return x
    return b.emit("pow_scalar", [x], scalar=exponent, reverse=False)


@on("pow.Scalar")
def _pow_scalar(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["exponent"])
    return b.emit("pow_scalar", [x], scalar=scalar_for(b, n, x, a["self"]), reverse=True)


@on("pow.Tensor_Tensor")
def _pow(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("pow", [tensor_arg(n, a["self"]), tensor_arg(n, a["exponent"])])


@on("clamp.default")
def _clamp(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    low, high = a.get("min"), a.get("max")
    bounds = {k: None if v is None else scalar_for(b, n, x, v)
              for k, v in (("min", low), ("max", high))}
    if low is None and high is None:
        return x
    return b.emit("clamp", [x], **bounds)


def _scalar_tensor(b: Builder, n: fx.Node, value: Any) -> str:
    """A 0-d constant of a Python scalar (its own dtype: a 0-d operand never widens)."""
    if not isinstance(value, (bool, int, float)):
        raise unsupported(n, f"the non-number argument {value!r}")
    return b.constant(torch.tensor(value), f"{n.name}_scalar")


def _binary(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        x, other = tensor_arg(n, a["self"]), a["other"]
        if not isinstance(other, str):
            other = _scalar_tensor(b, n, other)
        return b.emit(op, [x, other])

    return handler


for _op in ("floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor"):
    on(f"{_op}.Tensor" if _op != "floor_divide" else "floor_divide.default",
       f"{_op}.Scalar")(_binary(_op))


@on("div.Tensor_mode", "div.Scalar_mode")
def _div_mode(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    mode = a["rounding_mode"]
    if mode is None:
        other = a["other"]
        x = tensor_arg(n, a["self"])
        if isinstance(other, str):
            return b.emit("div", [x, other])
        return b.emit("div_scalar", [x], scalar=float(other), reverse=False)
    if mode != "floor":
        raise unsupported(n, f"rounding_mode={mode!r}")
    return _binary("floor_divide")(b, a, n)


@on("logical_not.default")
def _logical_not(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    if b.type(x).dtype == "bool":
        return b.emit("bitwise_not", [x])
    return b.emit("eq_scalar", [x], scalar=0)


def _as_bool(b: Builder, x: str) -> str:
    return x if b.type(x).dtype == "bool" else b.emit("ne_scalar", [x], scalar=0)


@on("logical_and.default", "logical_or.default")
def _logical(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    op = "bitwise_and" if "logical_and" in str(n.target) else "bitwise_or"
    x, other = (_as_bool(b, tensor_arg(n, a[k])) for k in ("self", "other"))
    return b.emit(op, [x, other])
