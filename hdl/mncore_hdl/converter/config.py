"""The converter's programmed state as one structured signal (mirrors ``regmap``)."""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from ..arch import ArchConfig
from .program import MAX_AXES, MAX_LANES, MAX_LOOPS
from .regmap import GATHER_QUANTITIES, OUTER_QUANTITIES
from .walker import ACC_BITS, EXTENT_BITS

__all__ = ["config_layout", "table_layout", "lane_layout"]


def table_layout(quantities: int) -> data.ArrayLayout:
    """A loop table: ``MAX_LOOPS`` x (extent, carries)."""
    return data.ArrayLayout(data.StructLayout({
        "extent": unsigned(EXTENT_BITS),
        "carry": data.ArrayLayout(signed(ACC_BITS), quantities),
    }), MAX_LOOPS)


def lane_layout() -> data.ArrayLayout:
    return data.ArrayLayout(data.StructLayout({
        "valid": 1,
        "elem": signed(ACC_BITS),
        "log": data.ArrayLayout(signed(ACC_BITS), MAX_AXES),
    }), MAX_LANES)


def config_layout(config: ArchConfig) -> data.StructLayout:
    """Every register the runtime writes (32-bit scalars; tables as in ``regmap``)."""
    word = unsigned(32)
    return data.StructLayout({
        "elem_bits": word,
        "src_group": word, "src_addr": word, "src_groups": word, "src_lwpg": word,
        "dst_group": word, "dst_addr": word, "dst_groups": word, "dst_lwpg": word,
        "n_outer": word, "n_read": word, "n_gather": word, "burst": word,
        "dims": data.ArrayLayout(word, MAX_AXES),
        "outer": table_layout(len(OUTER_QUANTITIES)),
        "read": table_layout(2),
        "gather": table_layout(len(GATHER_QUANTITIES)),
        "lanes": lane_layout(),
    })
