"""The two layout families the compiler defaults to: host-friendly rows and compute-native tiles."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..arch import MNCORE2, ArchConfig
from .dtypes import element_type
from .notation import ADDRESS, GROUP, Layout, SubAxis

__all__ = ["host_layout", "native_layout", "TILE_ROWS", "TILE_LW"]

#: Rows in one compute tile.
TILE_ROWS = 8
#: LWs across one compute tile row (4 LW = 8 fp32 or 16 fp16 values).
TILE_LW = 4


def _row_major(shape: Sequence[int], last: tuple[SubAxis, ...], row_lw: int,
               start_stride: int = 1) -> list[tuple[SubAxis, ...]]:
    """Row-major sub-axes for all axes but the last, rows ``row_lw`` LWs apart."""
    axes: list[tuple[SubAxis, ...]] = []
    stride = row_lw * start_stride
    for dim in reversed(shape[:-1]):
        axes.append((SubAxis(dim, ADDRESS, stride),))
        stride *= dim
    return list(reversed(axes)) + [last]


def host_layout(shape: Sequence[int], dtype: str = "float32") -> Layout:
    """Row-major in one Group, each row packed into lanes and padded to a whole LW.

    This is the layout a host fills cheapest: the bytes of a C-contiguous tensor, in order,
    with at most one LW of padding per row.
    """
    shape = tuple(shape)
    etype = element_type(dtype)
    if not shape:
        return Layout((), (), etype.name)
    cols = shape[-1]
    lanes = min(etype.lanes, cols)
    words = math.ceil(cols / lanes)
    last = (SubAxis(words, ADDRESS, 1), SubAxis(lanes, etype.lane_level, 1))
    return Layout(shape, tuple(_row_major(shape, last, words)), etype.name).normalized


def native_layout(shape: Sequence[int], dtype: str = "float32",
                  config: ArchConfig = MNCORE2) -> Layout:
    """The compute-native tiled layout the PE array reads and writes.

    The last two axes are cut into tiles of ``TILE_ROWS`` rows by ``TILE_LW`` LWs; row tiles
    are dealt round-robin over the Groups, and in each Group the tiles of a row of tiles lie
    one after another (each tile contiguous). Leading axes stack whole tiled matrices.
    """
    shape = tuple(shape)
    etype = element_type(dtype)
    if not shape:
        return Layout((), (), etype.name)
    rows = shape[-2] if len(shape) >= 2 else 1
    cols = shape[-1]
    lanes = min(etype.lanes, cols)
    tile_lw = min(TILE_LW, math.ceil(cols / lanes))
    col_tiles = math.ceil(cols / (tile_lw * lanes))
    tile_rows = min(TILE_ROWS, rows)
    row_tiles = math.ceil(rows / tile_rows)
    groups = min(config.groups, row_tiles)
    row_tiles_per_group = math.ceil(row_tiles / groups)
    tile_size = tile_rows * tile_lw
    matrix_lw = row_tiles_per_group * col_tiles * tile_size
    col_axis = (SubAxis(col_tiles, ADDRESS, tile_size), SubAxis(tile_lw, ADDRESS, 1),
                SubAxis(lanes, etype.lane_level, 1))
    if len(shape) == 1:
        return Layout(shape, (col_axis,), etype.name).normalized
    row_axis = (SubAxis(row_tiles_per_group, ADDRESS, col_tiles * tile_size),
                SubAxis(groups, GROUP, 1), SubAxis(tile_rows, ADDRESS, tile_lw))
    lead = _row_major(shape[:-1], row_axis, matrix_lw)[:-1]
    return Layout(shape, tuple(lead) + (row_axis, col_axis), etype.name).normalized
