"""Handlers of views and data movement: reshapes, expand, permutes, ``cat``, aliases."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import norm_dim, out_shape, tensor_arg
from .registry import Builder, on

__all__: list[str] = []


@on(
    "view.default", "_unsafe_view.default", "reshape.default", "_reshape_alias.default",
    "squeeze.default", "squeeze.dim", "squeeze.dims", "unsqueeze.default", "flatten.using_ints",
)  # fmt: skip
def _reshape(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = out_shape(n)
    return x if b.type(x).shape == shape else b.emit("reshape", [x], shape=shape)


@on("expand.default")
def _expand(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = out_shape(n)
    return x if b.type(x).shape == shape else b.emit("expand", [x], shape=shape)


def _permute_to(b: Builder, x: str, dims: tuple[int, ...]) -> str:
    return x if dims == tuple(range(len(dims))) else b.emit("permute", [x], dims=dims)


@on("permute.default")
def _permute(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    rank = b.type(x).rank
    return _permute_to(b, x, tuple(norm_dim(d, rank) for d in a["dims"]))


@on("transpose.int")
def _transpose(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    rank = b.type(x).rank
    dims = list(range(rank))
    d0, d1 = norm_dim(a["dim0"], rank), norm_dim(a["dim1"], rank)
    if rank == 0:
        return x
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _permute_to(b, x, tuple(dims))


@on("t.default")
def _t(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    return x if b.type(x).rank < 2 else _permute_to(b, x, (1, 0))


@on("cat.default")
def _cat(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    tensors = [tensor_arg(n, t) for t in a["tensors"]]
    if len(tensors) == 1:
        return tensors[0]
    rank = b.type(tensors[0]).rank
    return b.emit("cat", tensors, dim=norm_dim(a["dim"], rank))


@on("clone.default", "detach.default", "alias.default", "lift_fresh_copy.default")
def _identity(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return tensor_arg(n, a["self"])
