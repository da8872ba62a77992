"""Handlers of reductions: sums, means, extrema, and the indices of extrema."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import cast_to, norm_dim, norm_dims, tensor_arg
from .registry import Builder, Handler, on

__all__: list[str] = []


def _reduction(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        # dtype=: computed in that dtype; an integer sum runs in int64 in the IR (torch's
        # default), so an int32 one is cast back after (the same values modulo 2**32).
        x = cast_to(b, n, tensor_arg(n, a["self"]), a.get("dtype"))
        dims = norm_dims(a.get("dim"), b.type(x).rank)
        result = b.emit(op, [x], dims=dims, keepdim=bool(a.get("keepdim", False)))
        return cast_to(b, n, result, a.get("dtype"))

    return handler


on("sum.dim_IntList", "sum.default")(_reduction("sum"))


on("mean.dim", "mean.default")(_reduction("mean"))


on("amax.default", "max.default")(_reduction("amax"))


on("amin.default", "min.default")(_reduction("amin"))


def _arg(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        x = tensor_arg(n, a["self"])
        dim = a.get("dim")
        if dim is not None:
            dim = norm_dim(dim, b.type(x).rank)
        return b.emit(op, [x], dim=dim, keepdim=bool(a.get("keepdim", False)))

    return handler


on("argmax.default")(_arg("argmax"))


on("argmin.default")(_arg("argmin"))


def _with_indices(values_op: str, index_op: str) -> Handler:
    # torch.max(x, dim) -> (values, indices): the values are amax, the indices argmax; both
    # take the first of equal values, as torch does.
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
        values = _reduction(values_op)(b, a, n)
        indices = _arg(index_op)(b, a, n)
        return values, indices

    return handler


on("max.dim")(_with_indices("amax", "argmax"))


on("min.dim")(_with_indices("amin", "argmin"))
