"""The layout converter's seams: its register table, control and status bits, ports and counters.

Registers are 32 bits wide and word addressed (8-bit address). The programmable registers are
one table (:func:`register_fields`): each entry names a word address, the field of the
converter's programmed state it lands in, and that field's width. The RTL's register file and
state layout (``converter/regfile.py``, ``converter/config.py``) and the software's
``registers()`` (``converter/regmap.py``) are all generated from it. Loop tables store loops
innermost first; carries are two's complement. See ``docs/layout_converter.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .counters import COUNTER_BITS

__all__ = [
    "REG_BITS", "REG_ADDR_BITS", "Reg", "ErrorCode", "ERROR_CODE_BITS",
    "CTRL_START", "CTRL_CLEAR", "STATUS_BUSY", "STATUS_DONE", "STATUS_ERROR",
    "STATUS_CODE_SHIFT", "status_word",
    "MAX_LOOPS", "MAX_AXES", "MAX_LANES", "EXTENT_BITS", "ACC_BITS",
    "LoopTable", "OUTER", "READ", "GATHER", "OUTER_QUANTITIES", "READ_QUANTITIES",
    "GATHER_QUANTITIES", "LANE_BASE", "LANE_STRIDE", "LANE_FIELDS", "SCALAR_FIELDS",
    "SPLIT_BASE",
    "RegisterField", "register_fields",
    "COUNTERS", "BUSY", "DONE", "ERROR", "ERROR_CODE", "STATUS_PORTS",
    "REG_ADDR", "REG_WDATA", "REG_WE", "REG_RDATA", "REGISTER_BUS", "CONTROL_PORTS",
    "ConverterState", "CONVERTER_STATE",
]

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
    """The reason code in STATUS[8:12] (and on ``error_code``) when the error flag is set."""

    NONE = 0
    ELEM_BITS = 1      #: element width is neither 16 nor 32
    LOOPS = 2          #: a table has too many loops, a zero extent, or a bad burst length
    SRC_RANGE = 3      #: source footprint empty or beyond the Groups / simulated window
    DST_RANGE = 4      #: destination footprint empty or beyond the Groups / simulated window
    BUFFER = 5         #: one block's source LWs exceed half the on-chip buffer
    OVERLAP = 6        #: source and destination footprints overlap in some Group
    MEMORY = 7         #: the memory controller flagged a read beat (set while running)


ERROR_CODE_BITS = 4


class ConverterState(enum.IntEnum):
    """The converter's run state (the ``control`` state machine of ``converter/control.py``),
    in its encoding: states are numbered in the order the machine declares them
    (``tests/hdl/test_contracts.py`` holds the two together)."""

    IDLE = 0       #: waiting for CTRL start
    CHECK = 1      #: checking the program (one cycle per rule); an error ends the run here
    RUN = 2        #: the engines run; ``busy_cycles`` counts these cycles


#: The state signal of that machine in the exported design (Amaranth names it
#: ``<machine>_state``): the waves show it as :class:`ConverterState` names.
CONVERTER_STATE = "control_state"

# -- CTRL and STATUS ----------------------------------------------------------------------------

#: CTRL bits (write): start a run; clear a sticky done/error (both ignored while busy).
CTRL_START = 1 << 0
CTRL_CLEAR = 1 << 1
#: STATUS bit positions (read).
STATUS_BUSY = 0
STATUS_DONE = 1
STATUS_ERROR = 2
STATUS_CODE_SHIFT = 8


def status_word(busy: bool, done: bool, error: bool, code: int) -> int:
    """The STATUS register's value for these flags and error code."""
    return (int(busy) << STATUS_BUSY | int(done) << STATUS_DONE | int(error) << STATUS_ERROR
            | code << STATUS_CODE_SHIFT)


# -- the programmable registers ------------------------------------------------------------------

#: Loops in each of the outer, read and gather tables.
MAX_LOOPS = 6
#: Logical axes the masking logic compares.
MAX_AXES = 4
#: Destination lanes per LW the gather fills per cycle (16-bit elements).
MAX_LANES = 4
#: Width of a loop extent, and of a carry (and of the accumulators it is added to).
EXTENT_BITS = 20
ACC_BITS = 32


@dataclass(frozen=True)
class LoopTable:
    """``MAX_LOOPS`` loops at ``base + stride * k``: +0 extent, +1.. one carry per quantity."""

    name: str
    base: int
    stride: int
    quantities: tuple[str, ...]


OUTER_QUANTITIES = ("src_group", "src_addr", "src_lane", "dst_group", "dst_addr") + tuple(
    f"log{i}" for i in range(MAX_AXES))
READ_QUANTITIES = ("group", "addr")
GATHER_QUANTITIES = ("elem", "dst_addr") + tuple(f"log{i}" for i in range(MAX_AXES))
OUTER = LoopTable("outer", 0x20, 16, OUTER_QUANTITIES)
READ = LoopTable("read", 0x80, 4, READ_QUANTITIES)
GATHER = LoopTable("gather", 0xA0, 8, GATHER_QUANTITIES)
LOOP_TABLES = (OUTER, READ, GATHER)

#: Lane ``l`` at ``LANE_BASE + LANE_STRIDE * l``: +0 valid, +1 element offset, +2.. logical.
LANE_BASE, LANE_STRIDE = 0xD0, 8
#: A lane entry's fields: (name, array length or None for a scalar, bits, signed), in address
#: order.
LANE_FIELDS: tuple[tuple[str, int | None, int, bool], ...] = (
    ("valid", None, 1, False), ("elem", None, ACC_BITS, True), ("log", MAX_AXES, ACC_BITS, True))

#: The split loop at ``SPLIT_BASE``: +0 extent (engines used, 1: one engine), +1.. the stride
#: of each outer quantity between two engines' first blocks (engine ``k`` starts at
#: ``k * stride``).
SPLIT_BASE = 0xF0

#: Global registers the runtime programs, and the state field each lands in.
SCALAR_FIELDS = (
    (Reg.ELEM_BITS, "elem_bits"),
    (Reg.SRC_GROUP, "src_group"), (Reg.SRC_ADDR, "src_addr"),
    (Reg.SRC_GROUPS, "src_groups"), (Reg.SRC_LWPG, "src_lwpg"),
    (Reg.DST_GROUP, "dst_group"), (Reg.DST_ADDR, "dst_addr"),
    (Reg.DST_GROUPS, "dst_groups"), (Reg.DST_LWPG, "dst_lwpg"),
    (Reg.N_OUTER, "n_outer"), (Reg.N_READ, "n_read"), (Reg.N_GATHER, "n_gather"),
    (Reg.BURST, "burst"),
)


@dataclass(frozen=True)
class RegisterField:
    """One programmable register: its address and the state field it holds.

    ``path`` locates the field in the converter's programmed state, e.g. ``("src_addr",)`` or
    ``("outer", 2, "carry", 3)``; the field is ``bits`` wide and ``signed`` or not.
    """

    address: int
    path: tuple[str | int, ...]
    bits: int
    signed: bool

    @property
    def name(self) -> str:
        """``outer[2].carry[3]``-style name of the field."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
        return out


def register_fields() -> tuple[RegisterField, ...]:
    """Every programmable register, in address order (CTRL, STATUS and counters excluded)."""
    fields = [RegisterField(int(reg), (name,), REG_BITS, False) for reg, name in SCALAR_FIELDS]
    fields += [RegisterField(Reg.DIM0 + i, ("dims", i), REG_BITS, False)
               for i in range(MAX_AXES)]
    for table in LOOP_TABLES:
        for k in range(MAX_LOOPS):
            base = table.base + table.stride * k
            fields.append(RegisterField(base, (table.name, k, "extent"), EXTENT_BITS, False))
            fields += [RegisterField(base + 1 + q, (table.name, k, "carry", q), ACC_BITS, True)
                       for q in range(len(table.quantities))]
    fields.append(RegisterField(SPLIT_BASE, ("split", "extent"), EXTENT_BITS, False))
    fields += [RegisterField(SPLIT_BASE + 1 + q, ("split", "stride", q), ACC_BITS, True)
               for q in range(len(OUTER_QUANTITIES))]
    for lane in range(MAX_LANES):
        offset = LANE_BASE + LANE_STRIDE * lane
        for name, count, bits, signed in LANE_FIELDS:
            paths = [("lanes", lane, name)] if count is None else [
                ("lanes", lane, name, i) for i in range(count)]
            for path in paths:
                fields.append(RegisterField(offset, path, bits, signed))
                offset += 1
    return tuple(sorted(fields, key=lambda f: f.address))


# -- ports of every design embedding the converter ---------------------------------------------

#: Counters (cleared by start), by port name, with their read-only register.
COUNTERS = {"beats_read": Reg.BEATS_READ, "beats_written": Reg.BEATS_WRITTEN,
            "stall_cycles": Reg.STALL_CYCLES, "busy_cycles": Reg.BUSY_CYCLES}
#: Status output names.
BUSY, DONE, ERROR, ERROR_CODE = "busy", "done", "error", "error_code"
#: Status outputs: ``done`` and ``error`` are sticky until the next start or CTRL clear.
STATUS_PORTS = {BUSY: 1, DONE: 1, ERROR: 1, ERROR_CODE: ERROR_CODE_BITS}
#: Register bus port names.
REG_ADDR, REG_WDATA, REG_WE, REG_RDATA = "reg_addr", "reg_wdata", "reg_we", "reg_rdata"
#: The register bus: name -> (direction seen from the converter, width).
REGISTER_BUS = {REG_ADDR: ("in", REG_ADDR_BITS), REG_WDATA: ("in", REG_BITS),
                REG_WE: ("in", 1), REG_RDATA: ("out", REG_BITS)}
#: Register bus, status and counters: the flat ports every design that embeds the converter
#: exposes at its top under these names (name -> (direction, width)).
CONTROL_PORTS = {
    **REGISTER_BUS,
    **{name: ("out", bits) for name, bits in STATUS_PORTS.items()},
    **{name: ("out", COUNTER_BITS) for name in COUNTERS},
}
