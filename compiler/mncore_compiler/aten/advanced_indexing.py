"""Handlers of tensor-indexed reads and writes: ``x[i]`` (``index.Tensor``), ``x[i] = v``
(``index_put``) and ``index_copy`` (a static KV cache's write at the cache position)."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import norm_dim, tensor_arg, unsupported
from .registry import Builder, on

__all__: list[str] = []


def _indices(b: Builder, n: fx.Node, indices: list[Any]) -> tuple[tuple[int, ...], list[str]]:
    """The indexed dims and their index tensors; unsupported for a bool mask (its result's
    shape depends on the data)."""
    dims, tensors = [], []
    for dim, index in enumerate(indices):
        if index is None:
            continue
        index = tensor_arg(n, index)
        if b.type(index).dtype not in ("int32", "int64"):
            raise unsupported(n, f"a {b.type(index).dtype} index (the result's shape would "
                                 "depend on the data; index with int64 positions instead)")
        dims.append(dim)
        tensors.append(index)
    if not tensors:
        raise unsupported(n, "no index tensor")
    return tuple(dims), tensors


@on("index.Tensor", "_unsafe_index.Tensor")
def _index(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    dims, tensors = _indices(b, n, list(a["indices"]))
    return b.emit("index", [tensor_arg(n, a["self"]), *tensors], dims=dims)


@on("index_put.default", "_unsafe_index_put.default")
def _index_put(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, values = tensor_arg(n, a["self"]), tensor_arg(n, a["values"])
    dims, tensors = _indices(b, n, list(a["indices"]))
    if b.type(values).dtype != b.type(x).dtype:
        values = b.emit("cast", [values], dtype=b.type(x).dtype)
    return b.emit("index_put", [x, values, *tensors], dims=dims,
                  accumulate=bool(a["accumulate"]))


@on("index_copy.default")
def _index_copy(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    dim = norm_dim(a["dim"], b.type(x).rank)
    return b.emit("index_copy", [x, tensor_arg(n, a["index"]), tensor_arg(n, a["source"])],
                  dim=dim)
