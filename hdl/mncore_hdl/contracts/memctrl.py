"""The memory controller's seams: requester ports, request payloads, DRAM commands and CSRs.

Pure Python: the RTL (``mncore_hdl.memctrl``, ``mncore_hdl.top.system``), the RTL driver, the
cocotb benches and the tests all read these declarations; ``tests/hdl/test_contracts.py`` holds
the elaborated design to them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..arch import LW_BITS, LW_BYTES, ArchConfig

__all__ = [
    "PORTS", "HOST_PORT", "COMPUTE_PORT", "CONVERTER_PORT",
    "Cmd", "CMD_KIND_BITS",
    "max_burst", "addr_bits", "RequestFormat", "wdata_fields", "rdata_fields", "FULL_STROBE",
    "pack_wdata", "unpack_rdata",
    "CSR_ADDR_BITS", "CONTROLLER_REGISTERS", "PORT_REGISTERS", "PORT_BASE",
    "PORT_STRIDE", "REPORTED_COUNTERS", "register_map", "csr_address",
]

# -- requester ports --------------------------------------------------------------------------

#: Requester port index of each path on every Group controller (its CSR counters use these).
PORTS = {"host": 0, "compute": 1, "converter": 2}
HOST_PORT = PORTS["host"]
COMPUTE_PORT = PORTS["compute"]
CONVERTER_PORT = PORTS["converter"]


# -- DRAM commands on the observation port ----------------------------------------------------

class Cmd(enum.IntEnum):
    """DRAM command kinds on a controller's ``cmd_kind`` observation port."""

    NONE = 0
    ACT = 1
    PRE = 2
    RD = 3
    WR = 4
    REF = 5

    @property
    def is_column(self) -> bool:
        """RD or WR: a command that moves data."""
        return self in (Cmd.RD, Cmd.WR)


#: Width of ``cmd_kind``.
CMD_KIND_BITS = max(Cmd).bit_length()


# -- request, write-beat and read-beat payloads -----------------------------------------------

def max_burst(config: ArchConfig) -> int:
    """Longest burst one request may ask for, in beats: one DRAM row."""
    return config.row_lw


def addr_bits(config: ArchConfig) -> int:
    """Bits of an LW address inside one Group's simulated window (one spare for range checks)."""
    return max(1, (config.sim_window_lw - 1).bit_length()) + 1


@dataclass(frozen=True)
class RequestFormat:
    """The ``req`` payload of a requester port: ``addr | write << a | length << (a + 1)``.

    Build it with :meth:`of`; :attr:`fields` is the field order and widths the RTL's
    ``request_layout`` is made of, least significant first.
    """

    addr_bits: int
    length_bits: int

    @classmethod
    def of(cls, config: ArchConfig) -> RequestFormat:
        return cls(addr_bits(config), max_burst(config).bit_length())

    @property
    def fields(self) -> dict[str, int]:
        return {"addr": self.addr_bits, "write": 1, "length": self.length_bits}

    @property
    def bits(self) -> int:
        return sum(self.fields.values())

    def pack(self, addr: int, length: int, write: bool) -> int:
        """The payload word of one request."""
        if not 0 <= addr < 1 << self.addr_bits:
            raise ValueError(f"Request address must be in [0, 0x{(1 << self.addr_bits) - 1:x}], "
                             f"not 0x{addr:x}")
        if not 0 <= length < 1 << self.length_bits:
            raise ValueError(f"Request length must be in [0, {(1 << self.length_bits) - 1}], "
                             f"not {length}")
        return addr | int(write) << self.addr_bits | length << (self.addr_bits + 1)

    def unpack(self, word: int) -> tuple[int, int, bool]:
        """``(addr, length, write)`` of a payload word."""
        addr = word & ((1 << self.addr_bits) - 1)
        write = bool(word >> self.addr_bits & 1)
        length = word >> (self.addr_bits + 1) & ((1 << self.length_bits) - 1)
        return addr, length, write


def wdata_fields(config: ArchConfig) -> dict[str, int]:
    """The ``wdata`` payload's fields and widths, least significant first."""
    return {"data": config.lw_bits * config.port_lw_per_cycle,
            "strb": config.lw_bytes * config.port_lw_per_cycle}


def rdata_fields(config: ArchConfig) -> dict[str, int]:
    """The ``rdata`` payload's fields and widths, least significant first."""
    return {"data": config.lw_bits * config.port_lw_per_cycle, "error": 1}


#: Byte enables of a whole LW.
FULL_STROBE = (1 << LW_BYTES) - 1


def pack_wdata(data: int, strb: int = FULL_STROBE) -> int:
    """The ``wdata`` payload of one beat (one LW per cycle): ``data | strb << LW_BITS``."""
    return (data & ((1 << LW_BITS) - 1)) | (strb & FULL_STROBE) << LW_BITS


def unpack_rdata(word: int) -> tuple[int, bool]:
    """``(data, error)`` of one ``rdata`` payload (one LW per cycle)."""
    return word & ((1 << LW_BITS) - 1), bool(word >> LW_BITS & 1)


# -- performance counters and their register port ---------------------------------------------

CSR_ADDR_BITS = 8

#: Controller-wide registers, by word address.
CONTROLLER_REGISTERS = {
    "cycles": 0x00,
    "busy_cycles": 0x01,
    "row_hits": 0x02,
    "row_misses": 0x03,
    "row_conflicts": 0x04,
    "refreshes": 0x05,
    "refresh_cycles": 0x06,
    "error": 0x07,
    "error_addr": 0x08,
}
#: Per-port registers: word address ``PORT_BASE + PORT_STRIDE * port + offset``.
PORT_REGISTERS = {"read_beats": 0, "write_beats": 1, "stall_cycles": 2}
PORT_BASE = 0x10
PORT_STRIDE = 4
#: The controller-wide counters an RTL device reports (as ``mc<g>.<name>``).
REPORTED_COUNTERS = ("cycles", "busy_cycles", "row_hits", "row_misses", "row_conflicts",
                     "refreshes")


def csr_address(name: str, port: int | None = None) -> int:
    """Word address of controller register ``name``, or of port ``port``'s register ``name``."""
    if port is None:
        if name not in CONTROLLER_REGISTERS:
            raise ValueError(f"Unknown controller register {name!r}; expected one of "
                             f"{sorted(CONTROLLER_REGISTERS)}")
        return CONTROLLER_REGISTERS[name]
    if name not in PORT_REGISTERS:
        raise ValueError(f"Unknown port register {name!r}; expected one of "
                         f"{sorted(PORT_REGISTERS)}")
    return PORT_BASE + PORT_STRIDE * port + PORT_REGISTERS[name]


def register_map(ports: int) -> dict[str, int]:
    """Every register name (``port1.read_beats`` for per-port ones) to its word address."""
    regs = dict(CONTROLLER_REGISTERS)
    for p in range(ports):
        for name in PORT_REGISTERS:
            regs[f"port{p}.{name}"] = csr_address(name, p)
    if max(regs.values()) >= 1 << CSR_ADDR_BITS:
        raise ValueError(f"Too many ports for the register map: {ports}")
    return regs
