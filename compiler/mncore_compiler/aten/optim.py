"""Handlers of the optimizers' update ops: ``addcmul``, ``addcdiv``, ``lerp``.

In-place forms (``addcmul_``, ``lerp_``, ...) use these handlers of their functional form
(:func:`mncore_compiler.functionalize.functional_name`), in the order torch's kernels compute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import fx

from .args import scalar_arg, tensor_arg
from .registry import Builder, on

__all__: list[str] = []


def _scaled(b: Builder, x: str, value: float) -> str:
    return x if value == 1 else b.emit("mul_scalar", [x], scalar=value)


@on("addcmul.default")
def _addcmul(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # self + value * tensor1 * tensor2, as torch's kernel groups it
    x, t1, t2 = (tensor_arg(n, a[k]) for k in ("self", "tensor1", "tensor2"))
    product = b.emit("mul", [_scaled(b, t1, scalar_arg(n, a["value"])), t2])
    return b.emit("add", [x, product])


@on("addcdiv.default")
def _addcdiv(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # self + value * tensor1 / tensor2
    x, t1, t2 = (tensor_arg(n, a[k]) for k in ("self", "tensor1", "tensor2"))
    quotient = b.emit("div", [_scaled(b, t1, scalar_arg(n, a["value"])), t2])
    return b.emit("add", [x, quotient])


@on("lerp.Scalar")
def _lerp_scalar(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # torch: |w| < 0.5 ? self + w * (end - self) : end - (end - self) * (1 - w), in float32
    x, end = tensor_arg(n, a["self"]), tensor_arg(n, a["end"])
    weight = np.float32(scalar_arg(n, a["weight"]))
    diff = b.emit("sub", [end, x])
    if abs(weight) < 0.5:
        return b.emit("add", [x, b.emit("mul_scalar", [diff], scalar=float(weight))])
    rest = float(np.float32(1) - weight)
    return b.emit("sub", [end, b.emit("mul_scalar", [diff], scalar=rest)])


@on("lerp.Tensor")
def _lerp_tensor(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, end, weight = (tensor_arg(n, a[k]) for k in ("self", "end", "weight"))
    diff = b.emit("sub", [end, x])
    low = b.emit("add", [x, b.emit("mul", [weight, diff])])
    rest = b.emit("sub_scalar", [weight], scalar=1.0, reverse=True)
    high = b.emit("sub", [end, b.emit("mul", [diff, rest])])
    small = b.emit("lt_scalar", [b.emit("abs", [weight])], scalar=0.5)
    return b.emit("where", [small, low, high])
