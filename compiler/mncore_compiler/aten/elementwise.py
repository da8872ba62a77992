"""Handlers of elementwise aten ops: arithmetic, activations, casts, comparisons, ``where``."""

from __future__ import annotations

from typing import Any

from torch import fx

from ..ops import COMPARISONS
from .args import cast_to, scalar_for, tensor_arg
from .registry import Builder, Handler, on

__all__: list[str] = []


def _unary(op: str) -> Handler:
    return lambda b, a, n: b.emit(op, [tensor_arg(n, a["self"])])


for _op in ("neg", "abs", "relu", "sigmoid", "tanh", "exp", "reciprocal", "sqrt", "rsqrt"):
    on(f"{_op}.default")(_unary(_op))


# sgn is sign for the real tensors the IR holds (abs's backward traces to it).
on("sign.default", "sgn.default")(_unary("sign"))


@on("gelu.default")
def _gelu(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("gelu", [tensor_arg(n, a["self"])], approximate=a["approximate"])


def _binary(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        x, other = tensor_arg(n, a["self"]), a["other"]
        if isinstance(other, str):
            alpha = scalar_for(b, n, other, a.get("alpha", 1))
            if alpha != 1:
                other = b.emit("mul_scalar", [other], scalar=alpha)
            return b.emit(op, [x, other])
        scalar = scalar_for(b, n, x, other) * scalar_for(b, n, x, a.get("alpha", 1))
        if op in ("add", "mul"):
            return b.emit(f"{op}_scalar", [x], scalar=scalar)
        return b.emit(f"{op}_scalar", [x], scalar=scalar, reverse=False)

    return handler


for _op in ("add", "sub", "mul", "div"):
    on(f"{_op}.Tensor", f"{_op}.Scalar")(_binary(_op))


@on("rsub.Scalar", "rsub.Tensor")
def _rsub(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # rsub(x, other, alpha) = other - alpha * x
    x, other = tensor_arg(n, a["self"]), a["other"]
    alpha = scalar_for(b, n, x, a.get("alpha", 1))
    if alpha != 1:
        x = b.emit("mul_scalar", [x], scalar=alpha)
    if isinstance(other, str):
        return b.emit("sub", [other, x])
    return b.emit("sub_scalar", [x], scalar=scalar_for(b, n, x, other), reverse=True)


@on("_to_copy.default", "to.dtype")
def _to(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return cast_to(b, n, tensor_arg(n, a["self"]), a.get("dtype"))


@on("maximum.default", "minimum.default")
def _extremum(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    op = "maximum" if "maximum" in str(n.target) else "minimum"
    return b.emit(op, [tensor_arg(n, a["self"]), tensor_arg(n, a["other"])])


def _comparison(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        x, other = tensor_arg(n, a["self"]), a["other"]
        if isinstance(other, str):
            return b.emit(op, [x, other])
        if isinstance(other, bool):  # x == True compares with 1, as torch does
            other = int(other)
        return b.emit(f"{op}_scalar", [x], scalar=scalar_for(b, n, x, other))

    return handler


for _op in COMPARISONS:
    on(f"{_op}.Tensor", f"{_op}.Scalar")(_comparison(_op))


@on("where.self")
def _where(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a[k]) for k in ("condition", "self", "other")]
    return b.emit("where", operands)
