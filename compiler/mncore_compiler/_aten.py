"""Translation of traced aten operations into IR ops: one small handler per aten overload."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import torch
from torch import fx

from .errors import UnsupportedOperationError
from .ir import FLOAT_IR_DTYPES, TensorType, dtype_from_torch

__all__ = ["Deferred", "HANDLERS", "Unavailable"]


class _Builder(Protocol):
    def emit(self, op: str, operands: list[str], **attrs: Any) -> str: ...

    def type(self, name: str) -> TensorType: ...

    def constant(self, tensor: torch.Tensor, fallback: str) -> str: ...


Handler = Callable[[_Builder, dict[str, Any], fx.Node], Any]
HANDLERS: dict[str, Handler] = {}
"""Handlers by aten overload name (``str(torch.ops.aten.add.Tensor)``)."""


@dataclass(frozen=True)
class Unavailable:
    """A traced value the IR cannot hold; using it is an error, leaving it unused is not."""

    reason: str


class Deferred:
    """A traced value emitted only if something reads it (so that an unread one leaves no
    trace in the graph): ``value()`` emits it the first time and returns its name."""

    def __init__(self, emit: Callable[[], str]):
        self._emit: Callable[[], str] | None = emit
        self._name = ""

    def value(self) -> str:
        if self._emit is not None:
            self._name, self._emit = self._emit(), None
        return self._name


def _on(*names: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for name in names:
            HANDLERS[f"aten.{name}"] = handler
        return handler

    return register


def _unsupported(node: fx.Node, what: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"{node.target} with {what} is not supported by the MN-Core compiler"
    )


def _scalar(node: fx.Node, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _unsupported(node, f"the non-float scalar argument {value!r}")
    return float(value)


def _scalar_for(b: _Builder, node: fx.Node, x: str, value: Any) -> float | int:
    """A scalar operand of ``x``: an int stays an int for an integer or bool tensor, so that
    ``labels + 1`` stays int64 as in torch; otherwise a float."""
    number = _scalar(node, value)
    integral = b.type(x).dtype not in FLOAT_IR_DTYPES
    return int(value) if integral and isinstance(value, int) else number


def _tensor(node: fx.Node, value: Any) -> str:
    if not isinstance(value, str):
        raise _unsupported(node, f"the non-tensor argument {value!r}")
    return value


def _ir_dtype(node: fx.Node, dtype: torch.dtype) -> str:
    try:
        return dtype_from_torch(dtype)
    except TypeError:
        raise _unsupported(node, f"dtype={dtype}") from None


def _out_shape(node: fx.Node) -> tuple[int, ...]:
    return tuple(int(d) for d in node.meta["val"].shape)


def _norm_dim(dim: int, rank: int) -> int:
    return dim % max(rank, 1)


def _norm_dims(dims: Any, rank: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({_norm_dim(d, rank) for d in dims}))


def _cast_to(b: _Builder, node: fx.Node, x: str, dtype: torch.dtype | None) -> str:
    if dtype is None:
        return x
    target = _ir_dtype(node, dtype)
    return x if b.type(x).dtype == target else b.emit("cast", [x], dtype=target)


# -- elementwise --------------------------------------------------------------------------------


def _unary(op: str) -> Handler:
    return lambda b, a, n: b.emit(op, [_tensor(n, a["self"])])


for _op in ("neg", "abs", "relu", "sigmoid", "tanh", "exp", "reciprocal", "sqrt", "rsqrt"):
    HANDLERS[f"aten.{_op}.default"] = _unary(_op)


@_on("gelu.default")
def _gelu(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return b.emit("gelu", [_tensor(n, a["self"])], approximate=a["approximate"])


def _binary(op: str) -> Handler:
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
        x, other = _tensor(n, a["self"]), a["other"]
        if isinstance(other, str):
            alpha = _scalar_for(b, n, other, a.get("alpha", 1))
            if alpha != 1:
                other = b.emit("mul_scalar", [other], scalar=alpha)
            return b.emit(op, [x, other])
        scalar = _scalar_for(b, n, x, other) * _scalar_for(b, n, x, a.get("alpha", 1))
        if op in ("add", "mul"):
            return b.emit(f"{op}_scalar", [x], scalar=scalar)
        return b.emit(f"{op}_scalar", [x], scalar=scalar, reverse=False)

    return handler


for _op in ("add", "sub", "mul", "div"):
    _on(f"{_op}.Tensor", f"{_op}.Scalar")(_binary(_op))


@_on("rsub.Scalar", "rsub.Tensor")
def _rsub(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    # rsub(x, other, alpha) = other - alpha * x
    x, other = _tensor(n, a["self"]), a["other"]
    alpha = _scalar_for(b, n, x, a.get("alpha", 1))
    if alpha != 1:
        x = b.emit("mul_scalar", [x], scalar=alpha)
    if isinstance(other, str):
        return b.emit("sub", [other, x])
    return b.emit("sub_scalar", [x], scalar=_scalar_for(b, n, x, other), reverse=True)


# -- matmul -------------------------------------------------------------------------------------


@_on("mm.default", "bmm.default", "matmul.default")
def _matmul(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    y = _tensor(n, a["mat2"] if "mat2" in a else a["other"])
    if b.type(x).rank < 2 or b.type(y).rank < 2:
        raise _unsupported(n, "a 1-d operand (use a [1, K] or [K, 1] matrix)")
    return b.emit("matmul", [x, y])


@_on("addmm.default")
def _addmm(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [_tensor(n, a[k]) for k in ("self", "mat1", "mat2")]
    return b.emit("addmm", operands, alpha=_scalar(n, a["alpha"]), beta=_scalar(n, a["beta"]))


# -- reductions and softmax ---------------------------------------------------------------------


def _reduction(op: str) -> Handler:
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
        x = _cast_to(b, n, _tensor(n, a["self"]), a.get("dtype"))
        dims = _norm_dims(a.get("dim"), b.type(x).rank)
        return b.emit(op, [x], dims=dims, keepdim=bool(a.get("keepdim", False)))

    return handler


_on("sum.dim_IntList", "sum.default")(_reduction("sum"))
_on("mean.dim", "mean.default")(_reduction("mean"))
_on("amax.default", "max.default")(_reduction("amax"))


def _softmax(op: str) -> Handler:
    def handler(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
        if a.get("half_to_float"):
            raise _unsupported(n, "half_to_float=True")
        x = _cast_to(b, n, _tensor(n, a["self"]), a.get("dtype"))
        return b.emit(op, [x], dim=_norm_dim(a["dim"], b.type(x).rank))

    return handler


_on("_softmax.default", "softmax.int")(_softmax("softmax"))
_on("_log_softmax.default", "log_softmax.int")(_softmax("log_softmax"))


# -- data movement ------------------------------------------------------------------------------


@_on(
    "view.default", "_unsafe_view.default", "reshape.default", "_reshape_alias.default",
    "squeeze.default", "squeeze.dim", "squeeze.dims", "unsqueeze.default", "flatten.using_ints",
)  # fmt: skip
def _reshape(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    shape = _out_shape(n)
    return x if b.type(x).shape == shape else b.emit("reshape", [x], shape=shape)


@_on("expand.default")
def _expand(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    shape = _out_shape(n)
    return x if b.type(x).shape == shape else b.emit("expand", [x], shape=shape)


def _permute_to(b: _Builder, x: str, dims: tuple[int, ...]) -> str:
    return x if dims == tuple(range(len(dims))) else b.emit("permute", [x], dims=dims)


@_on("permute.default")
def _permute(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    rank = b.type(x).rank
    return _permute_to(b, x, tuple(_norm_dim(d, rank) for d in a["dims"]))


@_on("transpose.int")
def _transpose(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    rank = b.type(x).rank
    dims = list(range(rank))
    d0, d1 = _norm_dim(a["dim0"], rank), _norm_dim(a["dim1"], rank)
    if rank == 0:
        return x
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _permute_to(b, x, tuple(dims))


@_on("t.default")
def _t(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = _tensor(n, a["self"])
    return x if b.type(x).rank < 2 else _permute_to(b, x, (1, 0))


@_on("cat.default")
def _cat(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    tensors = [_tensor(n, t) for t in a["tensors"]]
    if len(tensors) == 1:
        return tensors[0]
    rank = b.type(tensors[0]).rank
    return b.emit("cat", tensors, dim=_norm_dim(a["dim"], rank))


@_on("clone.default", "detach.default", "alias.default", "lift_fresh_copy.default")
def _identity(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _tensor(n, a["self"])


@_on("_to_copy.default", "to.dtype")
def _to(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _cast_to(b, n, _tensor(n, a["self"]), a.get("dtype"))


# -- factories: evaluated now, held as constants ------------------------------------------------


@_on("full.default", "zeros.default", "ones.default", "scalar_tensor.default")
def _factory(b: _Builder, a: dict[str, Any], n: fx.Node) -> str:
    factory = cast(Callable[..., torch.Tensor], n.target)
    return b.constant(factory(*n.args, **n.kwargs), n.name)


# Comparisons, where, argmax/argmin, max/min with indices, nll_loss (_aten_int); backward ops,
# losses' backward and the optimizers' update ops (_aten_train), batch norm (_aten_norm):
# handlers of their own files.
from . import _aten_int, _aten_norm, _aten_train  # noqa: E402, F401
