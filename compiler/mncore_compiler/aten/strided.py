"""The handler of ``as_strided`` (and so ``as_strided_``) where it expresses a view of the
tensor's own elements.

The IR holds logical values, not strides. ``as_strided(x, size, stride, offset)`` reads x's
*storage*; capture knows x's strides from the trace (``node.meta["val"]``), so when x is dense
(its strides a permutation of contiguous strides; any storage offset of its own is not
supported) its storage is x permuted into stride order and flattened, and the result is
element ``offset + sum(i_k * stride_k)`` of that for every index ``i``. That is emitted as:

- a reshape, when the result reads the storage in row-major order from some start (what
  timm's adaptive pooling of a ``channels_last`` tensor traces to: ``mean`` then
  ``as_strided_`` onto channels_last strides of the same elements);
- a reshape and a permute, when the result is another dense ordering of a contiguous run of
  the storage (a transpose written with strides);
- an ``index_select`` of the flattened storage with the positions as a constant, otherwise
  (overlapping windows, steps).

A read past x's own elements (into a larger tensor x is a view of) is a clear error.

Autograd's backward of ``as_strided`` writes the gradient through another ``as_strided`` view
of a fresh ``new_empty_strided``/``new_zeros`` tensor: :func:`reshape_view_of` tells capture
when such a view is a plain reshape of all of its tensor, so the write goes through it, and
``new_empty_strided`` / ``empty_strided`` are fresh tensors here (zeros: torch leaves their
values unspecified).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, on

__all__ = ["reshape_view_of", "write_into_strided"]


def _dense_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """The dims in storage order (outermost first) when these strides lay the elements out
    densely, else None. Unit dims go where they stand: their stride is never read."""
    big = sorted((d for d in range(len(shape)) if shape[d] > 1), key=lambda d: -strides[d])
    expected = 1
    for d in reversed(big):
        if strides[d] != expected:
            return None
        expected *= shape[d]
    order, it = [], iter(big)
    for d in range(len(shape)):
        order.append(d if shape[d] <= 1 else next(it))
    return tuple(order)


def _row_major(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True when these strides lay the elements out in row-major order (unit dims aside)."""
    order = _dense_order(shape, strides)
    return order is not None and [d for d in order if shape[d] > 1] == sorted(
        d for d in range(len(shape)) if shape[d] > 1)


def reshape_view_of(view: fx.Node) -> tuple[int, ...] | None:
    """For an ``as_strided`` node that views all of a row-major dense tensor in row-major
    order (a reshape, whatever strides it names for unit dims): that tensor's shape; else
    None."""
    if str(view.target) != "aten.as_strided.default" or not isinstance(view.args[0], fx.Node):
        return None
    val = view.args[0].meta.get("val")
    if not isinstance(val, torch.Tensor) or int(val.storage_offset()) != 0:
        return None
    shape, strides = tuple(int(s) for s in val.shape), tuple(int(s) for s in val.stride())
    size = tuple(int(s) for s in cast(Sequence[int], view.args[1]))
    stride = tuple(int(s) for s in cast(Sequence[int], view.args[2]))
    offset = view.args[3] if len(view.args) > 3 else view.kwargs.get("storage_offset")
    if offset not in (None, 0) or math.prod(size) != math.prod(shape):
        return None
    return shape if _row_major(shape, strides) and _row_major(size, stride) else None


def _reshape(b: Builder, x: str, shape: tuple[int, ...]) -> str:
    return x if b.type(x).shape == shape else b.emit("reshape", [x], shape=shape)


def _permute(b: Builder, x: str, dims: tuple[int, ...]) -> str:
    return x if dims == tuple(range(len(dims))) else b.emit("permute", [x], dims=dims)


def _positions(size: tuple[int, ...], stride: tuple[int, ...], offset: int) -> torch.Tensor:
    """The storage position of each element of the result, in row-major order."""
    pos = torch.full((), offset, dtype=torch.int64)
    for extent, step in zip(size, stride, strict=True):
        pos = pos.unsqueeze(-1) + torch.arange(extent, dtype=torch.int64) * step
    return pos.reshape(-1)


@on("as_strided.default")
def _as_strided(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x = tensor_arg(n, a["self"])
    source = n.args[0]
    val = source.meta.get("val") if isinstance(source, fx.Node) else None
    if not isinstance(val, torch.Tensor):
        raise unsupported(n, "an input whose strides the trace does not record")
    shape, strides = tuple(int(s) for s in val.shape), tuple(int(s) for s in val.stride())
    order = _dense_order(shape, strides)
    if order is None or int(val.storage_offset()) != 0:
        raise unsupported(n, f"an input that is itself a strided view (shape {list(shape)}, "
                             f"strides {list(strides)}, offset {int(val.storage_offset())}); "
                             "only a dense tensor's own elements can be re-viewed")
    size = tuple(int(s) for s in a["size"])
    stride = tuple(int(s) for s in a["stride"])
    offset = int(a["storage_offset"]) if a.get("storage_offset") is not None else 0
    if any(s < 0 for s in stride) or offset < 0:
        raise unsupported(n, f"negative strides or offset (stride {list(stride)}, offset {offset})")
    numel = int(torch.tensor(shape).prod())
    count = int(torch.tensor(size).prod())
    positions = _positions(size, stride, offset)
    if count and int(positions.max()) >= numel:
        raise unsupported(n, f"size {list(size)}, stride {list(stride)}, offset {offset}, which "
                             f"reads past the {numel} elements of its {list(shape)} input")
    if count == 0:
        raise unsupported(n, f"the empty size {list(size)}")
    flat = _reshape(b, _permute(b, x, order), (numel,))
    start = int(positions.min())
    run = torch.arange(start, start + count, dtype=torch.int64)
    if torch.equal(positions, run) or torch.equal(positions.sort().values, run):
        if (start, count) != (0, numel):
            flat = b.emit("slice", [flat], dim=0, start=start, end=start + count, step=1)
        if torch.equal(positions, run):
            return _reshape(b, flat, size)
        result_order = _dense_order(size, stride)
        if result_order is not None:
            dense = _reshape(b, flat, tuple(size[d] for d in result_order))
            inverse = tuple(result_order.index(d) for d in range(len(size)))
            return _permute(b, dense, inverse)
        positions = positions - start
    index = b.constant(positions.to(torch.int32), f"{n.name}_positions")
    return _reshape(b, b.emit("index_select", [flat, index], dim=0), size)


def write_into_strided(b: Builder, view: fx.Node, base: str, value: str) -> str | None:
    """``base`` (the current value of the dense tensor the ``as_strided`` node ``view`` was
    taken from) with ``value``, a new value of the view, written at the view's storage
    positions; None when the view cannot be written through (its input a strided view
    itself, negative strides, positions past the tensor, or elements that overlap, whose
    write order torch leaves unspecified).

    Autograd's backward of a view it cannot express otherwise (funnel's relative shift:
    ``reshape``, ``slice``, ``reshape`` of a non-contiguous slice) writes the gradient through
    such a view of a fresh ``new_zeros``."""
    val = view.args[0].meta.get("val") if isinstance(view.args[0], fx.Node) else None
    if not isinstance(val, torch.Tensor) or int(val.storage_offset()) != 0:
        return None
    shape, strides = tuple(int(s) for s in val.shape), tuple(int(s) for s in val.stride())
    order = _dense_order(shape, strides)
    size = tuple(int(s) for s in cast(Sequence[int], view.args[1]))
    stride = tuple(int(s) for s in cast(Sequence[int], view.args[2]))
    offset = view.args[3] if len(view.args) > 3 else view.kwargs.get("storage_offset")
    offset = int(cast(int, offset or 0))
    numel, count = math.prod(shape), math.prod(size)
    if order is None or count == 0 or any(s < 0 for s in stride) or offset < 0:
        return None
    positions = _positions(size, stride, offset)
    if int(positions.max()) >= numel or len(positions.unique()) != count:
        return None
    if b.type(value).dtype != b.type(base).dtype:
        value = b.emit("cast", [value], dtype=b.type(base).dtype)
    flat = _reshape(b, _permute(b, base, order), (numel,))
    index = b.constant(positions, f"{view.name}_positions")
    written = b.emit("index_copy", [flat, index, _reshape(b, value, (count,))], dim=0)
    dense = _reshape(b, written, tuple(shape[d] for d in order))
    return _permute(b, dense, tuple(order.index(d) for d in range(len(shape))))


@on("new_empty_strided.default", "empty_strided.default")
def _empty_strided(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    val = n.meta["val"]
    if val.numel() == 0:
        raise unsupported(n, "an empty size")
    return b.constant(torch.zeros(tuple(val.shape), dtype=val.dtype), n.name)
