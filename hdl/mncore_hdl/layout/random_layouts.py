"""Seeded random layouts for tests: odd shapes, Group spreads, tiles, transposes, all dtypes."""

from __future__ import annotations

import math
import random

from .dtypes import DTYPES
from .notation import ADDRESS, GROUP, Layout, LayoutError, SubAxis

__all__ = ["random_layout", "random_shape"]


def random_shape(rng: random.Random, max_rank: int = 3, max_numel: int = 4096) -> tuple[int, ...]:
    """A shape of rank 1..``max_rank`` with odd sizes allowed, at most ``max_numel`` elements."""
    while True:
        rank = rng.randint(1, max_rank)
        shape = tuple(rng.choice([1, 2, 3, 5, 7, 8, 12, 16, 21, 32, 37, 64])
                      for _ in range(rank))
        if math.prod(shape) <= max_numel:
            return shape


def _split_axis(rng: random.Random, dim: int) -> list[int]:
    """Extents of an axis' sub-axes, major to minor; only the outermost pads."""
    inner: list[int] = []
    covered = 1
    for _ in range(rng.randint(0, 2)):
        f = rng.choice([2, 4, 8])
        if covered * f >= dim:
            break
        inner.append(f)
        covered *= f
    return [math.ceil(dim / covered)] + list(reversed(inner))


def random_layout(rng: random.Random, shape: tuple[int, ...], dtype: str,
                  groups: int = 4, max_lw_per_group: int = 4096) -> Layout:
    """A random valid layout of ``shape``: sub-axes placed on lanes, Groups and addresses.

    Address sub-axes are laid in a random order (row-major, tiled or transposed), densely or
    with a pitch gap, so conversions between two such layouts exercise every converter path.
    """
    etype = DTYPES[dtype]
    lane_level = etype.lane_level
    for _ in range(200):
        subs = [(axis, i, e) for axis, dim in enumerate(shape)
                for i, e in enumerate(_split_axis(rng, dim))]
        levels: dict[tuple[int, int], tuple[str, int]] = {}
        lane_reach = 1
        for axis, i, e in rng.sample(subs, len(subs)):
            if e > 1 and lane_reach * e <= etype.lanes and rng.random() < 0.6:
                levels[(axis, i)] = (lane_level, lane_reach)
                lane_reach *= e
        group_cands = [s for s in subs if (s[0], s[1]) not in levels and 1 < s[2] <= groups]
        if group_cands and rng.random() < 0.5:
            axis, i, e = rng.choice(group_cands)
            levels[(axis, i)] = (GROUP, 1)
        addr = [s for s in subs if (s[0], s[1]) not in levels]
        rng.shuffle(addr)
        stride = 1
        for axis, i, e in addr:
            levels[(axis, i)] = (ADDRESS, stride)
            stride *= e
            if rng.random() < 0.15:
                stride += rng.randint(1, 3)
        axes = []
        for axis in range(len(shape)):
            axes.append(tuple(SubAxis(e, *levels[(axis, i)]) for a, i, e in subs if a == axis))
        try:
            layout = Layout(shape, tuple(axes), dtype)
        except LayoutError:
            continue
        if layout.lw_per_group <= max_lw_per_group and layout.groups <= groups:
            return layout
    raise RuntimeError(f"No random layout found for shape {shape} {dtype}")
