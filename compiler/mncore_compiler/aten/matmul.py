"""Handlers of matrix products: ``mm``, ``bmm``, ``matmul``, ``addmm``; ``mv``, ``dot``,
``vdot`` and ``baddbmm`` (``beta * self + alpha * bmm``, bloom's and WavLM's attention scores)
through torch's decompositions."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import scalar_arg, tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__: list[str] = []

decompose("mv.default", "dot.default", "vdot.default", "baddbmm.default")


@on("mm.default", "bmm.default", "matmul.default")
def _matmul(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    y = tensor_arg(n, a["mat2"] if "mat2" in a else a["other"])
    if b.type(x).rank < 2 or b.type(y).rank < 2:
        raise unsupported(n, "a 1-d operand (use a [1, K] or [K, 1] matrix)")
    return b.emit("matmul", [x, y])


@on("addmm.default")
def _addmm(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a[k]) for k in ("self", "mat1", "mat2")]
    return b.emit("addmm", operands, alpha=scalar_arg(n, a["alpha"]), beta=scalar_arg(n, a["beta"]))
