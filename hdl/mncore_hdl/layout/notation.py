"""Layouts in MN-Core's sub-axis notation: the data model, parse, print, validation, normalisation.

A layout reads ``(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))``: the shape, then for each logical axis
its sub-axes from major to minor. A sub-axis ``E:S`` lays ``E`` consecutive digits of the axis'
index along LW addresses with stride ``S``; ``E_G:S`` spreads them over Groups, ``E_W:S`` over the
32-bit lanes of an LW and ``E_H:S`` over its 16-bit lanes. An element's Group, LW address and lane
are the sums of its digits times their strides on each level. Only the outermost sub-axis of an
axis may cover more indices than the axis has (padding); the extra slots are left zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np

from .dtypes import DTYPES, ElementType, element_type

_T = TypeVar("_T")

__all__ = ["SubAxis", "Layout", "LayoutError", "ADDRESS", "GROUP", "LEVELS", "axis_coordinates",
           "slots", "image_shape"]

ADDRESS = "A"
GROUP = "G"
LEVELS = (ADDRESS, GROUP, "W", "H")


class LayoutError(ValueError):
    """A layout that is malformed, or does not fit its shape or element type."""


#: Bound on extents, strides and shape entries: far beyond any DRAM, and small enough that
#: every size computed from a layout stays exact in int64 and float arithmetic.
_MAX_EXTENT = 1 << 48


@dataclass(frozen=True)
class SubAxis:
    """One sub-axis: ``extent`` digits placed on ``level`` with ``stride``."""

    extent: int
    level: str
    stride: int

    def __post_init__(self) -> None:
        for name in ("extent", "stride"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Sub-axis {name} must be an integer, not {value!r}")
        if self.extent <= 0:
            raise LayoutError(f"Sub-axis extent must be a positive integer, not {self.extent}")
        if self.stride < 0:
            raise LayoutError(f"Sub-axis stride must be a non-negative integer, not {self.stride}")
        if max(self.extent, self.stride) >= _MAX_EXTENT:
            raise LayoutError(f"Sub-axis {self.extent}:{self.stride}: extents and strides must "
                              f"be below 2**48, not {max(self.extent, self.stride)}")
        if self.level not in LEVELS:
            raise LayoutError(
                f"Sub-axis level must be one of {', '.join(LEVELS)} (A = address), "
                f"not {self.level!r}"
            )

    def __str__(self) -> str:
        if self.level == ADDRESS:
            return f"{self.extent}:{self.stride}"
        return f"{self.extent}_{self.level}:{self.stride}"

    @property
    def span(self) -> int:
        """The largest coordinate offset this sub-axis contributes."""
        return (self.extent - 1) * self.stride


#: Marks a layout hash computed in this process (see ``Layout.__hash__``).
_HASH_TOKEN = object()


def _no_hash(_: object) -> list:
    return [0, None]


_SUB_RE = re.compile(r"^\s*(\d+)(?:_([A-Za-z]))?\s*:\s*(\d+)\s*$")


@dataclass(frozen=True)
class Layout:
    """A tensor layout in DRAM.

    Parameters
    ----------
    shape : tuple of int
        The logical shape.
    axes : tuple of tuple of SubAxis
        For each logical axis, its sub-axes from major to minor.
    dtype : str
        Element type name (``float32``, ``float16``, ``bfloat16``, ``int32``, ``int64`` or
        ``bool``).

    Examples
    --------
    >>> str(Layout.parse("(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))"))
    '(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))'
    """

    shape: tuple[int, ...]
    axes: tuple[tuple[SubAxis, ...], ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "axes", tuple(tuple(a) for a in self.axes))
        object.__setattr__(self, "dtype", element_type(self.dtype).name)
        self._validate()

    def __hash__(self) -> int:
        # The fields' hash, computed once per layout in this process (layouts key dicts on
        # every device call, and a nested hash costs a call per sub-axis); a copy made by
        # pickling carries another process's token, so it hashes afresh.
        kept = self.memo("hash", _no_hash)
        if kept[1] is not _HASH_TOKEN:
            kept[:] = [hash((self.shape, self.axes, self.dtype)), _HASH_TOKEN]
        return kept[0]

    def memo(self, key: str, make: Callable[[Layout], _T]) -> _T:
        """``make(self)``, computed once per layout and kept on it under ``key``: the one place
        modules above the notation (the strided plan, a device's layout numbers) cache what
        they derive from a layout. A layout is immutable, so what is derived from it stays
        true; the memo is left out of equality and hashing."""
        memos = self.__dict__.get("_memos")
        if memos is None:
            memos = {}
            object.__setattr__(self, "_memos", memos)
        if key not in memos:
            memos[key] = make(self)
        return memos[key]

    # -- parse and print --------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str, dtype: str = "float32") -> Layout:
        """Parse the notation ``(d0,d1,...)/((sub, ...), (sub, ...), ...)``."""
        if not isinstance(text, str):
            raise TypeError(f"Layout text must be a string, not {text!r}")
        head, sep, body = text.partition("/")
        if not sep:
            raise LayoutError(f"Layout {text!r} has no '/': expected '(shape)/(axes)'")
        shape = tuple(_parse_ints(head, text))
        groups = _split_parens(body.strip(), text)
        if len(groups) != 1:
            raise LayoutError(f"Layout {text!r}: expected one parenthesised list of axes")
        axis_texts = _split_parens(groups[0], text) if groups[0].strip() else []
        axes = []
        for axis_text in axis_texts:
            subs = []
            for part in filter(str.strip, axis_text.split(",")):
                match = _SUB_RE.match(part)
                if not match:
                    raise LayoutError(
                        f"Layout {text!r}: sub-axis {part.strip()!r} is not 'E:S' or 'E_L:S'"
                    )
                extent, level, stride = match.groups()
                subs.append(SubAxis(int(extent), (level or ADDRESS).upper(), int(stride)))
            axes.append(tuple(subs))
        return cls(shape, tuple(axes), dtype)

    def __str__(self) -> str:
        shape = ",".join(str(d) for d in self.shape)
        axes = ", ".join("(" + ", ".join(str(s) for s in axis) + ")" for axis in self.axes)
        return f"({shape})/({axes})"

    def __repr__(self) -> str:
        return f"Layout({str(self)!r}, dtype={self.dtype!r})"

    # -- validation -------------------------------------------------------------------------

    def _validate(self) -> None:
        etype = self.element
        for d in self.shape:
            if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
                raise LayoutError(f"Shape entries must be positive integers, not {self.shape}")
            if d >= _MAX_EXTENT:
                raise LayoutError(f"Shape entries must be below 2**48, not {d}")
        if len(self.axes) != len(self.shape):
            raise LayoutError(
                f"Layout {self}: the shape has {len(self.shape)} axes but {len(self.axes)} "
                "sub-axis lists were given"
            )
        for i, (dim, axis) in enumerate(zip(self.shape, self.axes, strict=True)):
            covered = math.prod(s.extent for s in axis)
            inner = covered // axis[0].extent if axis else 1
            if covered < dim:
                raise LayoutError(
                    f"Layout {self}: axis {i} has {dim} indices but its sub-axes cover only "
                    f"{covered}"
                )
            if axis and math.ceil(dim / inner) != axis[0].extent:
                raise LayoutError(
                    f"Layout {self}: axis {i} of size {dim} needs an outermost extent of "
                    f"{math.ceil(dim / inner)}, not {axis[0].extent} (only the outermost "
                    "sub-axis may pad, and by less than one step)"
                )
            for sub in axis:
                if sub.level in ("W", "H") and sub.level != etype.lane_level:
                    raise LayoutError(
                        f"Layout {self}: {etype.name} packs into {etype.lane_level} lanes, "
                        f"not {sub.level} lanes"
                    )
        if self.lanes_used > etype.lanes:
            raise LayoutError(
                f"Layout {self}: lanes reach index {self.lanes_used - 1}, but an LW holds only "
                f"{etype.lanes} {etype.name} lanes"
            )
        if not self._provably_injective():
            self._check_injective_by_enumeration()

    def _provably_injective(self) -> bool:
        """True when, on every level, each sub-axis' stride clears the span of smaller ones."""
        by_level: dict[str, list[SubAxis]] = {}
        for sub in self.subaxes:
            if sub.extent > 1:
                by_level.setdefault(sub.level, []).append(sub)
        for subs in by_level.values():
            reach = 0
            for sub in sorted(subs, key=lambda s: s.stride):
                if sub.stride <= reach:
                    return False
                reach += sub.span
        return True

    def _check_injective_by_enumeration(self) -> None:
        if self.numel > 1 << 22:
            raise LayoutError(
                f"Layout {self}: sub-axes overlap on one level and the tensor is too large "
                "to check element by element; use strides that do not interleave"
            )
        flat = slots(self).ravel()
        if len(set(flat.tolist())) != flat.size:
            raise LayoutError(f"Layout {self}: two elements map to the same LW lane")

    # -- derived sizes (cached: a frozen layout's sizes never change) -------------------------

    @property
    def element(self) -> ElementType:
        return DTYPES[self.dtype]

    @cached_property
    def subaxes(self) -> tuple[SubAxis, ...]:
        return tuple(s for axis in self.axes for s in axis)

    def _reach(self, level: str) -> int:
        return sum(s.span for s in self.subaxes if s.level == level) + 1

    @cached_property
    def numel(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def groups(self) -> int:
        """Groups the layout spans (Group offsets 0 .. groups-1 from the buffer's first)."""
        return self._reach(GROUP)

    @cached_property
    def lanes_used(self) -> int:
        return self._reach(self.element.lane_level)

    @cached_property
    def lw_per_group(self) -> int:
        """LW addresses the layout spans in each Group (its footprint)."""
        return self._reach(ADDRESS)

    @cached_property
    def lw_count(self) -> int:
        """LWs in the whole footprint, all Groups together."""
        return self.groups * self.lw_per_group

    @cached_property
    def nbytes(self) -> int:
        """Bytes of DRAM the layout occupies (all Groups, padding included)."""
        return self.lw_count * 8

    @cached_property
    def data_nbytes(self) -> int:
        """Bytes of the tensor's elements alone."""
        return self.numel * self.element.nbytes

    # -- normalisation ----------------------------------------------------------------------

    @cached_property
    def normalized(self) -> Layout:
        """The canonical equivalent: unit sub-axes dropped, contiguous neighbours merged."""
        axes = []
        for dim, axis in zip(self.shape, self.axes, strict=True):
            merged: list[SubAxis] = []
            for sub in reversed(axis):  # minor to major
                if sub.extent == 1:
                    continue
                if merged:
                    last = merged[-1]
                    if last.level == sub.level and sub.stride == last.extent * last.stride:
                        merged[-1] = SubAxis(last.extent * sub.extent, sub.level, last.stride)
                        continue
                merged.append(sub)
            if merged:
                # Merging may have folded padding into the outermost sub-axis: trim it back.
                top = merged[-1]
                inner = math.prod(s.extent for s in merged[:-1])
                merged[-1] = SubAxis(math.ceil(dim / inner), top.level, top.stride)
            axes.append(tuple(reversed(merged)))
        return Layout(self.shape, tuple(axes), self.dtype)

    def equivalent(self, other: Layout) -> bool:
        """True when both layouts put every element at the same Group, address and lane."""
        if not isinstance(other, Layout):
            return False
        return self.normalized == other.normalized

    def to_dict(self) -> dict:
        return {"layout": str(self), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, data: dict) -> Layout:
        return cls.parse(data["layout"], data["dtype"])


def _parse_ints(text: str, whole: str) -> list[int]:
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise LayoutError(f"Layout {whole!r}: shape {inner!r} must be parenthesised")
    try:
        return [int(p) for p in inner[1:-1].split(",") if p.strip()]
    except ValueError:
        raise LayoutError(f"Layout {whole!r}: shape {inner!r} must hold integers") from None


def _split_parens(text: str, whole: str) -> list[str]:
    """Split ``(a)(b), (c)`` into the insides of its top-level parenthesised groups."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise LayoutError(f"Layout {whole!r}: unbalanced ')'")
            if depth == 0:
                parts.append(text[start:i])
        elif depth == 0 and ch not in " ,":
            raise LayoutError(f"Layout {whole!r}: unexpected {ch!r} outside parentheses")
    if depth:
        raise LayoutError(f"Layout {whole!r}: unbalanced '('")
    return parts


# -- the layout's definition: every element's slot in the image ---------------------------------

def axis_coordinates(layout: Layout, axis: int) -> dict[str, np.ndarray]:
    """Per-level coordinate offsets of every index along one logical axis.

    Returns a dict level -> int64 array of length ``shape[axis]``; levels the axis does not
    touch are absent.
    """
    dim = layout.shape[axis]
    index = np.arange(dim, dtype=np.int64)
    coords: dict[str, np.ndarray] = {}
    inner = 1
    for sub in reversed(layout.axes[axis]):
        digit = (index // inner) % sub.extent
        coords[sub.level] = coords.get(sub.level, 0) + digit * sub.stride
        inner *= sub.extent
    return coords


def slots(layout: Layout) -> np.ndarray:
    """For every element, its slot in the flattened image ``(group, address, lane)``.

    The image is ``layout.groups x layout.lw_per_group`` LWs of ``lanes`` elements each, so an
    element at Group ``g``, LW address ``a`` and lane ``l`` sits at
    ``(g * lw_per_group + a) * lanes + l``.
    """
    weights = _level_weights(layout)
    rank = len(layout.shape)
    total = np.zeros((1,) * rank, dtype=np.int64)
    for axis in range(rank):
        shape = [1] * rank
        shape[axis] = layout.shape[axis]
        for level, coord in axis_coordinates(layout, axis).items():
            total = total + (coord * weights[level]).reshape(shape)
    return np.broadcast_to(total, layout.shape)


def image_shape(layout: Layout) -> tuple[int, int]:
    """Shape of the DRAM image: ``(groups, lw_per_group)`` LWs."""
    return layout.groups, layout.lw_per_group


def _level_weights(layout: Layout) -> dict[str, int]:
    lanes = layout.element.lanes
    return {GROUP: layout.lw_per_group * lanes, ADDRESS: lanes, layout.element.lane_level: 1}

