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
    # An operand with no elements adds nothing (MobileBERT's zero-width dense weight of a
    # tiny config), and torch skips empty 1-D operands whatever the others' shapes (a cache
    # that starts empty, as Hugging Face's DynamicCache does, is concatenated onto).
    full = [t for t in tensors if 0 not in b.type(t).shape]
    tensors = full or [t for t in tensors if b.type(t).shape != (0,)] or tensors[:1]
    if len(tensors) == 1:
        return tensors[0]
    rank = b.type(tensors[0]).rank
    return b.emit("cat", tensors, dim=norm_dim(a["dim"], rank))


@on("clone.default", "detach.default", "alias.default", "lift_fresh_copy.default")
def _identity(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return tensor_arg(n, a["self"])


@on("repeat.default")
def _repeat(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # Tiled as torch defines it: x (left-padded with 1s to the repeats' rank) viewed as
    # [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], then merged pairwise.
    x, repeats = tensor_arg(n, a["self"]), tuple(int(r) for r in a["repeats"])
    shape = (1,) * (len(repeats) - b.type(x).rank) + b.type(x).shape
    spread = tuple(d for size in shape for d in (1, size))
    tiled = tuple(d for r, size in zip(repeats, shape, strict=True) for d in (r, size))
    x = b.emit("expand", [b.emit("reshape", [x], shape=spread)], shape=tiled)
    return b.emit("reshape", [x], shape=out_shape(n))
