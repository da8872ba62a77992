"""Aten handlers whose values are integer or bool: comparisons, where, argmax/argmin, max/min
with indices, and nll_loss (what make_fx turns ``cross_entropy`` into, after _log_softmax)."""

from __future__ import annotations

from typing import Any

from torch import fx

from ._aten import (
    HANDLERS,
    Deferred,
    Handler,
    _Builder,
    _norm_dim,
    _on,
    _reduction,
    _scalar_for,
    _tensor,
    _unsupported,
)
from ._ops_int import COMPARISONS, NLL_REDUCTIONS

__all__: list[str] = []


def _comparison(op: str) -> Handler:
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
        x, other = _tensor(n, a["self"]), a["other"]
        if isinstance(other, str):
            return b.emit(op, [x, other])
        if isinstance(other, bool):  # x == True compares with 1, as torch does
            other = int(other)
        return b.emit(f"{op}_scalar", [x], scalar=_scalar_for(b, n, x, other))

    return handler


for _op in COMPARISONS:
    _on(f"{_op}.Tensor", f"{_op}.Scalar")(_comparison(_op))


@_on("where.self")
def _where(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [_tensor(n, a[k]) for k in ("condition", "self", "other")]
    return b.emit("where", operands)


def _arg(op: str) -> Handler:
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
        x = _tensor(n, a["self"])
        dim = a.get("dim")
        if dim is not None:
            dim = _norm_dim(dim, b.type(x).rank)
        return b.emit(op, [x], dim=dim, keepdim=bool(a.get("keepdim", False)))

    return handler


HANDLERS["aten.argmax.default"] = _arg("argmax")
HANDLERS["aten.argmin.default"] = _arg("argmin")
_on("amin.default", "min.default")(_reduction("amin"))


def _with_indices(values_op: str, index_op: str) -> Handler:
    # torch.max(x, dim) -> (values, indices): the values are amax, the indices argmax; both
    # take the first of equal values, as torch does.
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str]:
        values = _reduction(values_op)(b, a, n)
        indices = _arg(index_op)(b, a, n)
        return values, indices

    return handler


HANDLERS["aten.max.dim"] = _with_indices("amax", "argmax")
HANDLERS["aten.min.dim"] = _with_indices("amin", "argmin")


@_on("nll_loss_forward.default")
def _nll_loss(b: _Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    if a.get("weight") is not None:
        raise _unsupported(n, "class weights (weight=...)")
    logp, target = _tensor(n, a["self"]), _tensor(n, a["target"])
    if b.type(target).dtype != "int64":
        raise _unsupported(n, f"{b.type(target).dtype} targets (give int64 class indices)")
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
