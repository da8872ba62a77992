"""The layout converter's register map (pure Python: shared by the RTL, drivers and tests).

Registers are 32 bits wide and word addressed (8-bit address). Loop tables store loops
innermost first; carries are two's-complement. See ``docs/layout_converter.md``.
"""

from __future__ import annotations

import enum

from .program import MAX_AXES, MAX_LANES, MAX_LOOPS, ConverterProgram

__all__ = ["Reg", "ErrorCode", "OUTER_BASE", "OUTER_STRIDE", "READ_BASE", "READ_STRIDE",
           "GATHER_BASE", "GATHER_STRIDE", "LANE_BASE", "LANE_STRIDE", "OUTER_QUANTITIES",
           "GATHER_QUANTITIES", "registers", "REG_BITS", "REG_ADDR_BITS"]

REG_BITS = 32
REG_ADDR_BITS = 8


class Reg(enum.IntEnum):
    """Global registers."""

    CTRL = 0x00          #: W: bit 0 start, bit 1 clear done/error
    STATUS = 0x01        #: R: bit 0 busy, 1 done, 2 error, bits 8..11 error code
    ELEM_BITS = 0x02     #: 16 or 32
    SRC_GROUP = 0x03     #: first source Group
    SRC_ADDR = 0x04      #: source base LW address in each Group
    SRC_GROUPS = 0x05    #: source footprint: Groups
    SRC_LWPG = 0x06      #: source footprint: LWs per Group
    DST_GROUP = 0x07
    DST_ADDR = 0x08
    DST_GROUPS = 0x09
    DST_LWPG = 0x0A
    N_OUTER = 0x0B       #: active loops of each table
    N_READ = 0x0C
    N_GATHER = 0x0D
    BURST = 0x0E         #: LWs per read burst (the read table's implicit innermost loop)
    DIM0 = 0x10          #: logical shape, DIM0..DIM3 (unused axes 1)
    BEATS_READ = 0x18    #: R: counters, cleared by start
    BEATS_WRITTEN = 0x19
    STALL_CYCLES = 0x1A
    BUSY_CYCLES = 0x1B


class ErrorCode(enum.IntEnum):
    """The reason code in STATUS[8:12] when the error flag is set."""

    NONE = 0
    ELEM_BITS = 1      #: element width is neither 16 nor 32
    LOOPS = 2          #: a table has too many loops, a zero extent, or a bad burst length
    SRC_RANGE = 3      #: source footprint empty or beyond the Groups / simulated window
    DST_RANGE = 4      #: destination footprint empty or beyond the Groups / simulated window
    BUFFER = 5         #: one block's source LWs exceed half the on-chip buffer
    OVERLAP = 6        #: source and destination footprints overlap in some Group
    MEMORY = 7         #: the memory controller flagged a read beat (set while running)


OUTER_BASE, OUTER_STRIDE = 0x20, 16   # +0 extent, +1.. carries OUTER_QUANTITIES
READ_BASE, READ_STRIDE = 0x80, 4      # +0 extent, +1 group carry, +2 address carry
GATHER_BASE, GATHER_STRIDE = 0xA0, 8  # +0 extent, +1.. carries GATHER_QUANTITIES
LANE_BASE, LANE_STRIDE = 0xD0, 8      # +0 valid, +1 element offset, +2.. logical offsets

OUTER_QUANTITIES = ("src_group", "src_addr", "src_lane", "dst_group", "dst_addr") + tuple(
    f"log{i}" for i in range(MAX_AXES))
GATHER_QUANTITIES = ("elem", "dst_addr") + tuple(f"log{i}" for i in range(MAX_AXES))

assert OUTER_BASE + OUTER_STRIDE * MAX_LOOPS <= READ_BASE
assert READ_BASE + READ_STRIDE * MAX_LOOPS <= GATHER_BASE
assert GATHER_BASE + GATHER_STRIDE * MAX_LOOPS <= LANE_BASE
assert LANE_BASE + LANE_STRIDE * MAX_LANES <= 1 << REG_ADDR_BITS


def registers(prog: ConverterProgram, src_group: int, src_addr: int, dst_group: int,
              dst_addr: int) -> dict[int, int]:
    """Register address -> 32-bit value programming ``prog`` (CTRL excluded)."""
    mask = (1 << REG_BITS) - 1
    regs: dict[int, int] = {
        Reg.ELEM_BITS: prog.elem_bits,
        Reg.SRC_GROUP: src_group, Reg.SRC_ADDR: src_addr,
        Reg.SRC_GROUPS: prog.src_groups, Reg.SRC_LWPG: prog.src_lw_per_group,
        Reg.DST_GROUP: dst_group, Reg.DST_ADDR: dst_addr,
        Reg.DST_GROUPS: prog.dst_groups, Reg.DST_LWPG: prog.dst_lw_per_group,
        Reg.N_OUTER: len(prog.outer), Reg.N_READ: len(prog.read),
        Reg.N_GATHER: len(prog.gather), Reg.BURST: prog.burst,
    }
    for i, dim in enumerate(prog.dims):
        regs[Reg.DIM0 + i] = dim
    for base, stride, table in ((OUTER_BASE, OUTER_STRIDE, prog.outer),
                                (READ_BASE, READ_STRIDE, prog.read),
                                (GATHER_BASE, GATHER_STRIDE, prog.gather)):
        for k, loop in enumerate(table):
            regs[base + stride * k] = loop.extent
            for q, carry in enumerate(loop.carries):
                regs[base + stride * k + 1 + q] = carry & mask
    for lane, entry in enumerate(prog.lanes):
        base = LANE_BASE + LANE_STRIDE * lane
        regs[base] = entry.valid
        regs[base + 1] = entry.elem & mask
        for ax, off in enumerate(entry.log):
            regs[base + 2 + ax] = off & mask
    return {int(k): int(v) for k, v in regs.items()}
