"""The strided fast path: tensor and image as numpy views over the layout's sub-axes, one copy each.

Padding splits an axis into a few rectangular pieces (:func:`radix_pieces`); a layout's copies
(its :class:`StridedPlan`) are computed once and kept on the layout. The golden model
(:mod:`.reference`) is what tests hold this path to.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np

from .notation import ADDRESS, GROUP, Layout

__all__ = ["Piece", "radix_pieces", "Chunk", "StridedPlan", "strided_plan", "is_dense",
           "image_view", "copy_strided", "copy_between", "rows_ok"]


class Piece:
    """A rectangular piece of a mixed-radix index range ``[0, dim)``.

    Digit ``k`` (major to minor) runs over ``counts[k]`` values from ``starts[k]`` (a count of
    one for a digit held fixed); the piece's
    indices are ``first .. first + prod(counts) - 1``, contiguous and in order.
    """

    __slots__ = ("starts", "counts", "first")

    def __init__(self, starts: tuple[int, ...], counts: tuple[int, ...], first: int):
        self.starts = starts
        self.counts = counts
        self.first = first


def radix_pieces(extents: tuple[int, ...], dim: int) -> list[Piece]:
    """Cover indices ``[0, dim)`` of a mixed-radix number (digits ``extents``, major first)
    with rectangular pieces: for each digit ``k`` of ``dim``, the major digits fixed at dim's
    digits, digit ``k`` below dim's, the minor digits free. Only the major digit may exceed the
    index range (padding), so one piece covers an unpadded axis."""
    inner = [1] * len(extents)
    for k in range(len(extents) - 2, -1, -1):
        inner[k] = inner[k + 1] * extents[k + 1]
    if not extents or inner[0] * extents[0] == dim:
        return [Piece((0,) * len(extents), tuple(extents), 0)]
    pieces = []
    fixed: list[int] = []
    first = 0
    rest = dim
    for k in range(len(extents)):
        digit = rest // inner[k]
        if digit:
            starts = tuple(fixed) + (0,) * (len(extents) - k)
            pieces.append(Piece(starts, (1,) * k + (digit,) + tuple(extents[k + 1:]), first))
        first += digit * inner[k]
        rest -= digit * inner[k]
        fixed.append(digit)
    return pieces


class Chunk:
    """One strided copy: a box of the tensor (per-axis slices, then split into sub-axes) and the
    image view it lands on, as (Group, element-in-row) offset and strides."""

    __slots__ = ("index", "split", "group_off", "elem_off", "group_strides", "elem_strides",
                 "starts", "axis_counts", "_geometry")

    def __init__(self, index, split, group_off, elem_off, group_strides, elem_strides,
                 starts=(), axis_counts=()):
        self.index = index
        self.split = split
        self.group_off = group_off
        self.elem_off = elem_off
        self.group_strides = group_strides
        self.elem_strides = elem_strides
        #: Per tensor axis, the box's first index and its counts per sub-axis.
        self.starts = starts
        self.axis_counts = axis_counts
        # (kind, strides) -> geometry: calls repeat the same few base strides.
        self._geometry: dict[tuple, tuple[int, tuple[int, ...]]] = {}

    def image_geometry(self, row: int, item: int) -> tuple[int, tuple[int, ...]]:
        """Byte offset and strides of the chunk's slots in an image of ``row``-byte Group
        strides and ``item``-byte elements."""
        key = ("image", row, item)
        hit = self._geometry.get(key)
        if hit is None:
            hit = self._image_geometry(row, item)
            if len(self._geometry) < 64:
                self._geometry[key] = hit
        return hit

    def _image_geometry(self, row: int, item: int) -> tuple[int, tuple[int, ...]]:
        strides = tuple(g * row + e * item
                        for g, e in zip(self.group_strides, self.elem_strides, strict=True))
        return self.group_off * row + self.elem_off * item, strides

    def tensor_geometry(self, strides: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """Byte offset and strides of the chunk's box in a tensor of byte ``strides``."""
        hit = self._geometry.get(strides)
        if hit is None:
            hit = self._tensor_geometry(strides)
            if len(self._geometry) < 64:
                self._geometry[strides] = hit
        return hit

    def _tensor_geometry(self, strides: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        offset = sum(a * b for a, b in zip(self.starts, strides, strict=True))
        out: list[int] = []
        for counts, stride in zip(self.axis_counts, strides, strict=True):
            inner = math.prod(counts)
            for n in counts:
                inner //= n
                out.append(stride * inner)
        return offset, tuple(out)


class StridedPlan:
    __slots__ = ("chunks", "dense", "identity")

    def __init__(self, chunks: list[Chunk], dense: bool, identity: bool):
        self.chunks = chunks
        #: Every image slot holds an element (no padding lane, no gap).
        self.dense = dense
        #: The image is the tensor's C-order bytes (row-major, packed, one Group).
        self.identity = identity



def strided_plan(layout: Layout) -> StridedPlan:
    """The strided copies of ``layout``, kept on the (frozen, immutable) layout itself
    (:meth:`Layout.memo`): looking it up costs no hash of the layout's nested tuples."""
    return layout.memo("strided_plan", _make_plan)


def _make_plan(layout: Layout) -> StridedPlan:
    """The strided copies of ``layout``: one, or a few per padded axis combination."""
    lanes = layout.element.lanes
    per_axis = []
    for dim, axis in zip(layout.shape, layout.axes, strict=True):
        extents = tuple(s.extent for s in axis) or (1,)
        gsteps = tuple(s.stride if s.level == GROUP else 0 for s in axis) or (0,)
        esteps = tuple(0 if s.level == GROUP else s.stride * (lanes if s.level == ADDRESS else 1)
                       for s in axis) or (0,)
        options = []
        for piece in radix_pieces(extents, dim):
            goff = sum(a * w for a, w in zip(piece.starts, gsteps, strict=True))
            eoff = sum(a * w for a, w in zip(piece.starts, esteps, strict=True))
            size = math.prod(piece.counts)
            options.append((slice(piece.first, piece.first + size), piece.counts, goff, eoff,
                            gsteps, esteps))
        per_axis.append(options)
    chunks = []
    for combo in product(*per_axis):
        chunks.append(Chunk(
            tuple(c[0] for c in combo) + (Ellipsis,),
            tuple(n for c in combo for n in c[1]),
            sum(c[2] for c in combo),
            sum(c[3] for c in combo),
            tuple(w for c in combo for w in c[4]),
            tuple(w for c in combo for w in c[5]),
            tuple(c[0].start for c in combo),
            tuple(c[1] for c in combo),
        ))
    dense = layout.numel == layout.lw_count * lanes
    identity = False
    if dense and len(chunks) == 1 and layout.groups == 1:
        chunk = chunks[0]
        c_order = [1] * len(chunk.split)
        for k in range(len(chunk.split) - 2, -1, -1):
            c_order[k] = c_order[k + 1] * chunk.split[k + 1]
        identity = chunk.elem_off == 0 and all(
            e == c for n, e, c in zip(chunk.split, chunk.elem_strides, c_order, strict=True)
            if n > 1)
    return StridedPlan(chunks, dense, identity)


def is_dense(layout: Layout) -> bool:
    """True when every slot of the layout's footprint holds an element (nothing to zero)."""
    return strided_plan(layout).dense


def image_view(raw: np.ndarray, chunk: Chunk) -> np.ndarray:
    """The chunk's slots in ``raw``, a ``(groups, row)`` array of elements (rows may lie
    anywhere in memory, each contiguous)."""
    start = raw[chunk.group_off, chunk.elem_off:]
    row, item = raw.strides[0], raw.itemsize
    strides = tuple(g * row + e * item
                    for g, e in zip(chunk.group_strides, chunk.elem_strides, strict=True))
    return np.lib.stride_tricks.as_strided(start, shape=chunk.split, strides=strides,
                                           writeable=raw.flags.writeable)


def copy_strided(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for two views of one shape and dtype, with the trailing dimensions
    contiguous in both merged into one wider element (numpy copies short runs slowly)."""
    item = dst.itemsize
    run = 1
    k = dst.ndim
    while k > 0:
        n = dst.shape[k - 1]
        if n != 1 and (dst.strides[k - 1] != item * run or src.strides[k - 1] != item * run):
            break
        run *= n
        k -= 1
    if run > 1 and k < dst.ndim:
        wide = np.dtype(f"V{item * run}")
        shape = dst.shape[:k] + (run,)
        as_strided = np.lib.stride_tricks.as_strided
        dst = as_strided(dst, shape, dst.strides[:k] + (item,), writeable=True).view(wide)
        src = as_strided(src, shape, src.strides[:k] + (item,), writeable=False).view(wide)
    np.copyto(dst, src)


def _merged(shape: tuple[int, ...], dst_strides: tuple[int, ...], src_strides: tuple[int, ...],
            item: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], np.dtype]:
    """Shape, strides and element of a copy once the trailing dimensions contiguous on both
    sides are merged into one wider element (numpy copies short runs slowly)."""
    key = (shape, dst_strides, src_strides, item)
    hit = _MERGED.get(key)
    if hit is not None:
        return hit
    run = 1
    k = len(shape)
    while k > 0:
        n = shape[k - 1]
        if n != 1 and (dst_strides[k - 1] != item * run or src_strides[k - 1] != item * run):
            break
        run *= n
        k -= 1
    dtype = np.dtype(f"V{item * run}") if run > 1 else np.dtype(f"u{item}")
    out = (shape[:k], dst_strides[:k], src_strides[:k], dtype)
    if len(_MERGED) < 4096:
        _MERGED[key] = out
    return out


_MERGED: dict[tuple, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], np.dtype]] = {}


def _strided(base: np.ndarray, offset: int, shape: tuple[int, ...],
             strides: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A view of ``base``'s bytes from byte ``offset`` (writable when ``base`` is).

    A C-contiguous base is a buffer the view is built on directly; otherwise ``base`` is a
    ``(groups, row)`` array whose rows are contiguous (Groups of DRAM), and ``offset`` counts
    ``base.strides[0]`` bytes per Group."""
    if base.flags.c_contiguous:
        return np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)
    group, byte = divmod(offset, base.strides[0])
    row = base[group]
    end = byte + dtype.itemsize + sum((n - 1) * st for n, st in zip(shape, strides, strict=True))
    if end <= row.nbytes and min(strides, default=0) >= 0:
        # within one Group's row (a copy split per Group): the row is the buffer
        return np.ndarray(shape, dtype, buffer=row, offset=byte, strides=strides)
    start = row.view(np.uint8)[byte:]
    view = np.lib.stride_tricks.as_strided(start, shape + (dtype.itemsize,), strides + (1,),
                                           writeable=base.flags.writeable)
    return view.view(dtype)[..., 0]


def copy_between(dst: np.ndarray, dst_geometry: tuple[int, tuple[int, ...]],
                  src: np.ndarray, src_geometry: tuple[int, tuple[int, ...]],
                  shape: tuple[int, ...], item: int) -> None:
    """Copy a box of ``shape`` elements of ``item`` bytes between two strided views, each
    given as a base array and (byte offset, byte strides): one numpy copy."""
    merged, dst_strides, src_strides, dtype = _merged(shape, dst_geometry[1], src_geometry[1],
                                                      item)
    dst_off, src_off = dst_geometry[0], src_geometry[0]
    # A side spread over Groups (rows of a non-contiguous base, far apart in memory) is
    # copied one Group at a time: several far-apart streams at once copy at about half the
    # speed of one (measured: 16 MiB native <-> host rows in DRAM, 3.0 ms at once, 1.8 ms per
    # Group, 1.2 ms for a memcpy).
    split = [k for k in range(len(merged))
             if merged[k] > 1 and ((not dst.flags.c_contiguous and dst_strides[k] >= dst.strides[0])
                                   or (not src.flags.c_contiguous
                                       and src_strides[k] >= src.strides[0]))]
    if not split or math.prod(merged[k] for k in split) > 64:
        np.copyto(_strided(dst, dst_off, merged, dst_strides, dtype),
                  _strided(src, src_off, merged, src_strides, dtype))
        return
    keep = [k for k in range(len(merged)) if k not in split]
    sub = tuple(merged[k] for k in keep)
    sub_dst = tuple(dst_strides[k] for k in keep)
    sub_src = tuple(src_strides[k] for k in keep)
    for index in product(*(range(merged[k]) for k in split)):
        d = dst_off + sum(i * dst_strides[k] for i, k in zip(index, split, strict=True))
        s = src_off + sum(i * src_strides[k] for i, k in zip(index, split, strict=True))
        np.copyto(_strided(dst, d, sub, sub_dst, dtype), _strided(src, s, sub, sub_src, dtype))


def rows_ok(image: np.ndarray) -> bool:
    """An image :func:`_strided` can address: contiguous, or contiguous rows."""
    return image.flags.c_contiguous or (image.ndim == 2 and image.strides[1] == image.itemsize
                                        and image.strides[0] >= image.shape[1] * image.itemsize)


