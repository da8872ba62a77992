"""Handlers of indexing: slices and selects, ``index_select``, ``gather``, embeddings (forward
and backward), ``masked_fill``, ``arange``, the scans ``cumsum`` and ``cumprod``; ``split``,
``unbind``, ``stack``, ``narrow``, ``masked_fill``, ``triu`` and ``tril`` through torch's
decompositions, and ``one_hot`` through the kit's own (a comparison with ``arange``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import (
    cast_to,
    norm_dim,
    out_shape,
    scalar_arg,
    scalar_for,
    slice_bound,
    tensor_arg,
    unsupported,
)
from .registry import Builder, Handler, decompose, on, replace_function

__all__: list[str] = []


decompose("split.Tensor", "unbind.int", "stack.default", "masked_fill.Scalar",
          "masked_fill.Tensor", "masked_fill_.Scalar", "masked_fill_.Tensor",
          "_safe_softmax.default", "cumprod_backward.default", "triu.default", "tril.default")


@replace_function(torch.nn.functional.one_hot)
def _one_hot(x: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    # torch's kernel reads the largest class (and checks the smallest) from the values, which
    # a trace cannot: with num_classes given, each row compares its class with every class.
    # (An index outside [0, num_classes) gives a row of zeros where torch raises.)
    if num_classes < 0:
        raise ValueError("F.one_hot needs num_classes= in a compiled function: without it the "
                         "class count is read from the tensor's values")
    classes = torch.arange(num_classes, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(-1) == classes).to(torch.int64)


def slice_of(b: Builder, x: str, dim: int, start: int, end: int, step: int = 1) -> str:
    """``x[start:end:step]`` along ``dim`` (bounds already clamped); ``x`` itself if whole."""
    size = b.type(x).shape[dim]
    if (start, end, step) == (0, size, 1):
        return x
    return b.emit("slice", [x], dim=dim, start=start, end=max(start, end), step=step)


@on("slice.Tensor")
def _slice(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    dim = norm_dim(a["dim"], len(shape))
    step = int(a["step"])
    if step < 1:
        raise unsupported(n, f"step={step}")
    start = slice_bound(a["start"], shape[dim], 0)
    return slice_of(b, x, dim, start, slice_bound(a["end"], shape[dim], shape[dim]), step)


@on("select.int")
def _select(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    dim = norm_dim(a["dim"], len(shape))
    index = int(a["index"]) % shape[dim]
    one = slice_of(b, x, dim, index, index + 1)
    return b.emit("reshape", [one], shape=out_shape(n))


@on("narrow.default")
def _narrow(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    shape = b.type(x).shape
    dim = norm_dim(a["dim"], len(shape))
    start = int(a["start"]) % shape[dim] if int(a["start"]) < 0 else int(a["start"])
    return slice_of(b, x, dim, start, start + int(a["length"]))


@on("split_with_sizes.default")
def _split_with_sizes(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, ...]:
    x = tensor_arg(n, a["self"])
    dim = norm_dim(a["dim"], b.type(x).rank)
    parts, start = [], 0
    for size in a["split_sizes"]:
        parts.append(slice_of(b, x, dim, start, start + int(size)))
        start += int(size)
    return tuple(parts)


@on("index_select.default")
def _index_select(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, index = tensor_arg(n, a["self"]), tensor_arg(n, a["index"])
    rank = b.type(x).rank
    if b.type(index).rank == 0:
        index = b.emit("reshape", [index], shape=(1,))
    result = b.emit("index_select", [x, index], dim=norm_dim(a["dim"], rank))
    return result if b.type(result).shape == out_shape(n) else b.emit(
        "reshape", [result], shape=out_shape(n))


@on("gather.default")
def _gather(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    if a.get("sparse_grad"):
        raise unsupported(n, "sparse_grad=True")
    x, index = tensor_arg(n, a["self"]), tensor_arg(n, a["index"])
    return b.emit("gather", [x, index], dim=norm_dim(a["dim"], b.type(x).rank))


def _flat_index(b: Builder, index: str) -> str:
    count = b.type(index).numel
    return index if b.type(index).rank == 1 else b.emit("reshape", [index], shape=(count,))


@on("embedding.default")
def _embedding(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # weight[indices]: rows of the [V, D] table for the flattened indices, then reshaped.
    weight, indices = tensor_arg(n, a["weight"]), tensor_arg(n, a["indices"])
    rows = b.emit("index_select", [weight, _flat_index(b, indices)], dim=0)
    return b.emit("reshape", [rows], shape=out_shape(n))


@on("embedding_dense_backward.default")
def _embedding_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # Each index's gradient row adds into its table row, in index order (torch's CPU kernel);
    # the padding row gets none.
    if a["scale_grad_by_freq"]:
        raise unsupported(n, "scale_grad_by_freq=True")
    grad, indices = tensor_arg(n, a["grad_output"]), tensor_arg(n, a["indices"])
    flat = _flat_index(b, indices)
    width = out_shape(n)[1:]
    rows = b.emit("reshape", [grad], shape=(b.type(flat).shape[0], *width))
    padding = int(a["padding_idx"])
    if padding >= 0:
        keep = b.emit("ne_scalar", [flat], scalar=padding)
        keep = b.emit("reshape", [keep], shape=(b.type(flat).shape[0],) + (1,) * len(width))
        zero = b.constant(torch.tensor(0.0, dtype=b.type(rows).torch_dtype), f"{n.name}_zero")
        rows = b.emit("where", [keep, rows, zero])
    zeros = b.constant(torch.zeros(out_shape(n), dtype=b.type(rows).torch_dtype), n.name)
    return b.emit("index_add", [zeros, flat, rows], dim=0)


@on("arange.default", "arange.start", "arange.start_step")
def _arange(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # The bounds are Python numbers at capture: the result is a constant.
    val = n.meta["val"]
    start = a.get("start", 0)
    step = a.get("step", 1)
    for bound in (start, a["end"], step):
        scalar_arg(n, bound)
    return b.constant(torch.arange(start, a["end"], step, dtype=val.dtype), n.name)


def _scan(op: str) -> Handler:
    # dtype=: the scan runs in that dtype. The IR's scan of an integer tensor runs in int64
    # (torch's default), so an int32 one is cast back after: the same values modulo 2**32.
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        dtype = a.get("dtype")
        x = cast_to(b, n, tensor_arg(n, a["self"]), dtype)
        result = b.emit(op, [x], dim=norm_dim(a["dim"], b.type(x).rank))
        return cast_to(b, n, result, dtype)

    return handler


on("cumsum.default")(_scan("cumsum"))


on("cumprod.default")(_scan("cumprod"))


@on("index_add.default")
def _index_add(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, index, source = (tensor_arg(n, a[k]) for k in ("self", "index", "source"))
    alpha = scalar_arg(n, a.get("alpha", 1))
    if alpha != 1:
        source = b.emit("mul_scalar", [source], scalar=alpha)
    return b.emit("index_add", [x, index, source], dim=norm_dim(a["dim"], b.type(x).rank))


@on("scatter.src")
def _scatter(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    if a.get("reduce") is not None:
        raise unsupported(n, f"reduce={a['reduce']!r}")
    x, index, source = (tensor_arg(n, a[k]) for k in ("self", "index", "src"))
    return b.emit("scatter", [x, index, source], dim=norm_dim(a["dim"], b.type(x).rank))


@on("scatter.value")
def _scatter_value(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # cumprod's backward: a scalar written at each index along dim.
    if a.get("reduce") is not None:
        raise unsupported(n, f"reduce={a['reduce']!r}")
    x, index = tensor_arg(n, a["self"]), tensor_arg(n, a["index"])
    fill = torch.full(b.type(index).shape, scalar_for(b, n, x, a["value"]),
                      dtype=b.type(x).torch_dtype)
    source = b.constant(fill, f"{n.name}_value")
    return b.emit("scatter", [x, index, source], dim=norm_dim(a["dim"], b.type(x).rank))


@on("scatter_add.default")
def _scatter_add(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, index, source = (tensor_arg(n, a[k]) for k in ("self", "index", "src"))
    return b.emit("scatter_add", [x, index, source], dim=norm_dim(a["dim"], b.type(x).rank))


def _into_zeros(b: Builder, n: fx.Node, grad: str, dim: int, positions: range) -> str:
    """A zero tensor of the call's result shape with ``grad``'s slices along ``dim`` added at
    ``positions`` (the backward of a slice or a select)."""
    zeros = b.constant(torch.zeros(out_shape(n), dtype=b.type(grad).torch_dtype), n.name)
    if not positions:  # the backward of an empty slice (phi3's rotary pass-through part)
        return zeros
    index = b.constant(torch.tensor(list(positions), dtype=torch.int64), f"{n.name}_index")
    return b.emit("index_add", [zeros, index, grad], dim=dim)


@on("slice_backward.default")
def _slice_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad = tensor_arg(n, a["grad_output"])
    sizes = out_shape(n)
    dim = norm_dim(a["dim"], len(sizes))
    start = slice_bound(a["start"], sizes[dim], 0)
    end = slice_bound(a["end"], sizes[dim], sizes[dim])
    positions = range(start, max(start, end), int(a["step"]))
    if len(positions) == sizes[dim]:
        return grad
    return _into_zeros(b, n, grad, dim, positions)


@on("select_backward.default")
def _select_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    grad = tensor_arg(n, a["grad_output"])
    sizes = out_shape(n)
    dim = norm_dim(a["dim"], len(sizes))
    one = b.emit("reshape", [grad], shape=sizes[:dim] + (1,) + sizes[dim + 1:])
    return _into_zeros(b, n, one, dim, range(int(a["index"]) % sizes[dim],
                                            int(a["index"]) % sizes[dim] + 1))
