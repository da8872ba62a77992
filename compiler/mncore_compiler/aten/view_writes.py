"""Writes into part of a tensor: ``slice_scatter`` (``select_scatter`` through torch's
decomposition), and :func:`write_into_view`, which capture uses to write an in-place update
of a ``slice`` or ``select`` view (``x[..., 1:] = y``, ``x[:, 0] = 1``) back into its tensor."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import norm_dim, slice_bound, tensor_arg, unsupported
from .registry import Builder, decompose, on

__all__ = ["slice_positions", "write_into_view"]


decompose("select_scatter.default")


def slice_positions(shape: tuple[int, ...], dim: int, start: Any, end: Any,
                    step: Any) -> tuple[int, range]:
    """``(dim, positions)``: the indices along ``dim`` that ``x[start:end:step]`` (of a tensor
    of ``shape``, along ``dim``) takes, bounds clamped as torch clamps them."""
    dim = norm_dim(dim, len(shape))
    size = shape[dim]
    first = slice_bound(start, size, 0)
    return dim, range(first, max(first, slice_bound(end, size, size)), int(step))


def _scatter(b: Builder, name: str, base: str, value: str, dim: int,
             positions: range) -> str:
    """``base`` with ``value`` (base's shape, ``len(positions)`` long along ``dim``) written
    at ``positions`` along ``dim``."""
    shape = b.type(base).shape
    if len(positions) == shape[dim]:
        return value  # all of it, in order (a step of 1)
    index = b.constant(torch.tensor(list(positions), dtype=torch.int64), f"{name}_index")
    return b.emit("index_copy", [base, index, value], dim=dim)


def write_into_view(b: Builder, view: fx.Node, base: str, value: str) -> str | None:
    """``base`` (the current value of the tensor ``view`` was taken from) with ``value``, a new
    value of ``view``, written into it; None for a view this cannot write through.

    Handles ``slice.Tensor`` (step >= 1), ``select.int`` and ``narrow.default``; the value is
    cast to the base's dtype, as an in-place write is."""
    key = str(view.target)
    shape = b.type(base).shape
    args: list[Any] = list(view.args) + [None] * 5
    if key == "aten.slice.Tensor":
        dim, positions = slice_positions(shape, args[1] if args[1] is not None else 0,
                                         args[2], args[3], args[4] if args[4] is not None else 1)
        if positions.step < 1:
            return None
    elif key == "aten.select.int":
        dim = norm_dim(int(args[1]), len(shape))
        index = int(args[2]) % shape[dim]
        positions = range(index, index + 1)
    elif key == "aten.narrow.default":
        dim = norm_dim(int(args[1]), len(shape))
        start = int(args[2]) % shape[dim] if int(args[2]) < 0 else int(args[2])
        positions = range(start, start + int(args[3]))
    else:
        return None
    part = shape[:dim] + (len(positions),) + shape[dim + 1:]
    if b.type(value).dtype != b.type(base).dtype:
        value = b.emit("cast", [value], dtype=b.type(base).dtype)
    if b.type(value).shape != part:
        value = b.emit("reshape", [value], shape=part)
    return _scatter(b, view.name, base, value, dim, positions)


@on("slice_scatter.default")
def _slice_scatter(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    base, src = tensor_arg(n, a["self"]), tensor_arg(n, a["src"])
    shape = b.type(base).shape
    dim, positions = slice_positions(shape, a["dim"], a["start"], a["end"], a["step"])
    if positions.step < 1:
        raise unsupported(n, f"step={positions.step}")
    return _scatter(b, n.name, base, src, dim, positions)
