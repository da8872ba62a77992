"""DRAM-to-DRAM layout conversion: the descriptor a layout converter executes, and its golden model.

``conversion(src, dst)`` refines the two layouts' sub-axes into one common loop nest. Each loop
has an extent, the logical axis and index step it walks, and for the source and the destination
the Group, LW-address and lane stride of one step. Walking the nest visits every element once;
an element whose logical index on some axis reaches the axis size is padding and is skipped. The
converter reads the whole source footprint and writes the whole destination footprint (padding
lanes and LWs zero), so its traffic is ``src.nbytes + dst.nbytes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import product

import numpy as np

from .notation import ADDRESS, GROUP, Layout, LayoutError, SubAxis
from .strided import Piece, copy_between, radix_pieces, rows_ok

__all__ = ["Loop", "ConversionDescriptor", "conversion", "UnsupportedConversion"]


class UnsupportedConversion(LayoutError):
    """Two layouts whose sub-axes do not nest, so no loop nest converts one into the other."""


@dataclass(frozen=True)
class Loop:
    """One loop of the conversion nest; strides are per step of this loop."""

    extent: int
    axis: int
    step: int
    src_group: int
    src_addr: int
    src_lane: int
    dst_group: int
    dst_addr: int
    dst_lane: int


@dataclass(frozen=True)
class ConversionDescriptor:
    """What a layout converter is programmed with (addresses relative to each buffer's base).

    Attributes
    ----------
    shape : tuple of int
        Logical shape; an index at or past a dimension is padding and is skipped.
    elem_bits : int
        Element width (32 or 16); ``64 // elem_bits`` lanes per LW.
    loops : tuple of Loop
        The loop nest, outermost first.
    src_groups, src_lw_per_group, dst_groups, dst_lw_per_group : int
        The two footprints.
    src, dst : str
        The two layouts in notation, for people reading a program.
    """

    shape: tuple[int, ...]
    elem_bits: int
    loops: tuple[Loop, ...]
    src_groups: int
    src_lw_per_group: int
    dst_groups: int
    dst_lw_per_group: int
    src: str
    dst: str

    @property
    def lanes(self) -> int:
        return 64 // self.elem_bits

    @property
    def read_lw(self) -> int:
        """LWs the converter reads (the whole source footprint)."""
        return self.src_groups * self.src_lw_per_group

    @property
    def write_lw(self) -> int:
        """LWs the converter writes (the whole destination footprint)."""
        return self.dst_groups * self.dst_lw_per_group

    @property
    def iterations(self) -> int:
        """Elements visited by the loop nest, padding included."""
        return math.prod(loop.extent for loop in self.loops)

    @property
    def masked(self) -> bool:
        """True when the nest visits padding positions that must be skipped."""
        return self.iterations != math.prod(self.shape)

    def to_dict(self) -> dict:
        """The descriptor as plain data (what ``asdict`` gives, with the shape as a list),
        built field by field: ``asdict``'s deep copy is slow on a call's hot path."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["shape"] = list(self.shape)
        data["loops"] = tuple({f.name: getattr(lp, f.name) for f in _LOOP_FIELDS}
                              for lp in self.loops)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ConversionDescriptor:
        loops = tuple(Loop(**loop) for loop in data["loops"])
        fields = {k: v for k, v in data.items() if k not in ("loops", "shape")}
        return cls(shape=tuple(data["shape"]), loops=loops, **fields)

    # -- golden execution -------------------------------------------------------------------

    def element_slots(self) -> tuple[np.ndarray, np.ndarray]:
        """Source and destination image slots of every non-padding element, in nest order."""
        lanes = self.lanes
        n = len(self.loops)
        src = np.zeros((1,) * n, dtype=np.int64)
        dst = np.zeros((1,) * n, dtype=np.int64)
        valid = np.ones((1,) * n, dtype=bool)
        logical = [np.zeros((1,) * n, dtype=np.int64) for _ in self.shape]
        for i, loop in enumerate(self.loops):
            shape = [1] * n
            shape[i] = loop.extent
            digit = np.arange(loop.extent, dtype=np.int64).reshape(shape)
            src = src + digit * ((loop.src_group * self.src_lw_per_group + loop.src_addr) * lanes
                                 + loop.src_lane)
            dst = dst + digit * ((loop.dst_group * self.dst_lw_per_group + loop.dst_addr) * lanes
                                 + loop.dst_lane)
            logical[loop.axis] = logical[loop.axis] + digit * loop.step
        for axis, dim in enumerate(self.shape):
            valid = valid & (logical[axis] < dim)
        full = np.broadcast_shapes(src.shape, dst.shape, valid.shape)
        valid = np.broadcast_to(valid, full)
        return np.broadcast_to(src, full)[valid], np.broadcast_to(dst, full)[valid]

    def execute_reference(self, src_image: np.ndarray) -> np.ndarray:
        """:meth:`execute` through the slot index of every element (the golden model)."""
        self._check_source(src_image)
        raw = np.uint32 if self.elem_bits == 32 else np.uint16
        src_flat = np.ascontiguousarray(src_image).reshape(-1).view(raw)
        dst_flat = np.zeros(self.write_lw * self.lanes, dtype=raw)
        src_slots, dst_slots = self.element_slots()
        dst_flat[dst_slots] = src_flat[src_slots]
        return dst_flat.view(np.uint64).reshape(self.dst_groups, self.dst_lw_per_group)

    def execute(self, src_image: np.ndarray) -> np.ndarray:
        """Convert a source image (``(src_groups, src_lw_per_group)`` uint64) to a new one."""
        self._check_source(src_image)
        dst = np.zeros((self.dst_groups, self.dst_lw_per_group), dtype=np.uint64)
        self.execute_into(src_image, dst, zeroed=True)
        return dst

    def execute_into(self, src_image: np.ndarray, dst_image: np.ndarray, *,
                     zeroed: bool = False) -> None:
        """Convert ``src_image`` into ``dst_image`` in place (views of DRAM allowed; the two
        must not overlap). Destination slots no element reaches become zero unless ``zeroed``
        says they already are. Same result as :meth:`execute_reference`, one strided copy per
        rectangular piece of the nest."""
        self._check_source(src_image)
        expected = (self.dst_groups, self.dst_lw_per_group)
        if dst_image.shape != expected or dst_image.dtype != np.uint64:
            raise LayoutError(
                f"Conversion expects a destination image of {expected} uint64 LWs, "
                f"got {dst_image.shape} {dst_image.dtype}"
            )
        plan = _nest_plan(self)
        if plan is None:
            dst_image[...] = self.execute_reference(src_image)
            return
        raw = np.uint32 if self.elem_bits == 32 else np.uint16
        if not zeroed and math.prod(self.shape) != self.write_lw * self.lanes:
            dst_image[...] = 0
        src = _raw_rows(src_image, raw)
        dst = _raw_rows(dst_image, raw)
        if not rows_ok(src):
            src = np.ascontiguousarray(src)
        if not rows_ok(dst):
            # a destination whose rows overlap or run backwards: convert, then store
            dst_image[...] = self.execute(src_image)
            return
        item = src.itemsize
        for piece in plan:
            copy_between(dst, _geometry(dst, piece.dst_off, piece.dst_strides),
                          src, _geometry(src, piece.src_off, piece.src_strides),
                          piece.counts, item)

    def _check_source(self, src_image: np.ndarray) -> None:
        expected = (self.src_groups, self.src_lw_per_group)
        if src_image.shape != expected or src_image.dtype != np.uint64:
            raise LayoutError(
                f"Conversion expects a source image of {expected} uint64 LWs, "
                f"got {src_image.shape} {src_image.dtype}"
            )


_LOOP_FIELDS = fields(Loop)


class _NestPiece:
    """A rectangular piece of the loop nest: per-loop counts, and for each side the (Group,
    element-in-row) offset and per-loop strides."""

    __slots__ = ("counts", "src_off", "src_strides", "dst_off", "dst_strides")

    def __init__(self, counts, src_off, src_strides, dst_off, dst_strides):
        self.counts = counts
        self.src_off = src_off
        self.src_strides = src_strides
        self.dst_off = dst_off
        self.dst_strides = dst_strides


@lru_cache(maxsize=256)
def _nest_plan(desc: ConversionDescriptor) -> list[_NestPiece] | None:
    """The nest cut into rectangular pieces that skip padding, or None when the loops of some
    axis do not form a mixed-radix number (only the index path handles such a descriptor)."""
    lanes = desc.lanes
    loops = desc.loops
    if any(lp.axis < 0 or lp.axis >= len(desc.shape) for lp in loops):
        return None
    src_str = [(lp.src_group, lp.src_addr * lanes + lp.src_lane) for lp in loops]
    dst_str = [(lp.dst_group, lp.dst_addr * lanes + lp.dst_lane) for lp in loops]
    per_axis: list[list[tuple[list[int], Piece]]] = []
    for axis, dim in enumerate(desc.shape):
        members = sorted((i for i, lp in enumerate(loops) if lp.axis == axis),
                         key=lambda i: -loops[i].step)
        step = 1
        for i in reversed(members):
            if loops[i].step != step:
                return None
            step *= loops[i].extent
        extents = tuple(loops[i].extent for i in members)
        # An axis no loop walks has one index: nothing to restrict.
        per_axis.append([(members, p) for p in radix_pieces(extents, dim)] if members
                        else [([], Piece((), (), 0))])
    pieces = []
    for combo in product(*per_axis):
        counts = [lp.extent for lp in loops]
        starts = [0] * len(loops)
        for members, piece in combo:
            for j, i in enumerate(members):
                counts[i] = piece.counts[j]
                starts[i] = piece.starts[j]
        pieces.append(_NestPiece(
            tuple(counts),
            _dot(starts, src_str), tuple(src_str),
            _dot(starts, dst_str), tuple(dst_str)))
    return pieces


def _dot(starts: list[int], strides: list[tuple[int, int]]) -> tuple[int, int]:
    return (sum(a * g for a, (g, _) in zip(starts, strides, strict=True)),
            sum(a * e for a, (_, e) in zip(starts, strides, strict=True)))


def _raw_rows(image: np.ndarray, raw: type) -> np.ndarray:
    if image.strides[1] != image.itemsize:
        image = np.ascontiguousarray(image)
    return image.view(raw)


def _geometry(rows: np.ndarray, off: tuple[int, int],
              strides: tuple[tuple[int, int], ...]) -> tuple[int, tuple[int, ...]]:
    """Byte offset and strides of a piece in ``rows`` (a ``(groups, elements)`` image)."""
    row, item = rows.strides[0], rows.itemsize
    return off[0] * row + off[1] * item, tuple(g * row + e * item for g, e in strides)


def conversion(src: Layout, dst: Layout) -> ConversionDescriptor:
    """The descriptor converting a buffer in layout ``src`` into one in layout ``dst``."""
    if not isinstance(src, Layout) or not isinstance(dst, Layout):
        raise TypeError(f"conversion() takes two Layouts, not {src!r} and {dst!r}")
    return _conversion(src, dst)


@lru_cache(maxsize=256)
def _conversion(src: Layout, dst: Layout) -> ConversionDescriptor:
    """:func:`conversion`, memoised: a pure function of two frozen layouts."""
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise LayoutError(
            f"Cannot convert {src} ({src.dtype}) into {dst} ({dst.dtype}): shapes and element "
            "types must match"
        )
    src_n, dst_n = src.normalized, dst.normalized
    loops: list[Loop] = []
    for axis, dim in enumerate(src.shape):
        loops.extend(_refine_axis(axis, dim, src_n.axes[axis], dst_n.axes[axis], src, dst))
    return ConversionDescriptor(
        shape=src.shape,
        elem_bits=src.element.bits,
        loops=tuple(loops),
        src_groups=src.groups,
        src_lw_per_group=src.lw_per_group,
        dst_groups=dst.groups,
        dst_lw_per_group=dst.lw_per_group,
        src=str(src),
        dst=str(dst),
    )


def _grow(sub: SubAxis, multiple: int) -> SubAxis:
    """``sub`` with its extent rounded up to a multiple of ``multiple`` (the rest is padding)."""
    return SubAxis(-(-sub.extent // multiple) * multiple, sub.level, sub.stride)


def _strides(sub: SubAxis) -> tuple[int, int, int]:
    """(group, address, lane) stride of one step of ``sub``."""
    if sub.level == GROUP:
        return sub.stride, 0, 0
    if sub.level == ADDRESS:
        return 0, sub.stride, 0
    return 0, 0, sub.stride


def _refine_axis(axis: int, dim: int, src_subs: tuple[SubAxis, ...],
                 dst_subs: tuple[SubAxis, ...], src: Layout, dst: Layout) -> list[Loop]:
    """Common refinement of one axis' two sub-axis lists, returned major to minor."""
    s = list(src_subs) or [SubAxis(1, ADDRESS, 0)]
    d = list(dst_subs) or [SubAxis(1, ADDRESS, 0)]
    out: list[Loop] = []
    step = 1
    while s and d and step < dim:
        a, b = s[-1], d[-1]
        a_outer, b_outer = len(s) == 1, len(d) == 1
        if a.extent % b.extent and b.extent % a.extent:
            # Only the outermost sub-axis of a side may grow (into padding) to restore nesting.
            if a_outer:
                a = _grow(a, b.extent)
            elif b_outer:
                b = _grow(b, a.extent)
            else:
                raise UnsupportedConversion(
                    f"Cannot convert {src} into {dst}: on axis {axis}, sub-axes of extent "
                    f"{a.extent} and {b.extent} do not nest"
                )
        e = min(a.extent, b.extent)
        sg, sa, sl = _strides(a)
        dg, da, dl = _strides(b)
        out.append(Loop(e, axis, step, sg, sa, sl, dg, da, dl))
        step *= e
        s.pop()
        d.pop()
        if a.extent > e:
            s.append(SubAxis(a.extent // e, a.level, a.stride * e))
        if b.extent > e:
            d.append(SubAxis(b.extent // e, b.level, b.stride * e))
    return [loop for loop in reversed(out) if loop.extent > 1]
