"""The ports ``cosim_tb`` adds around the co-simulation top: DMA engines, back door, command track.

Pure Python: ``mncore_hdl.top.cosim_tb`` writes the testbench's Verilog from these declarations,
and the RTL driver's DMA path, the cocotb server and the waveform groups name its ports through
them; ``tests/hdl/test_contracts.py`` compares them with the generated testbench. What each
port does is documented in :mod:`mncore_hdl.top.cosim_tb`.
"""

from __future__ import annotations

import enum

from ..arch import ArchConfig
from .cosim import TOP_PATHS, cosim_ports
from .counters import COUNTER_BITS
from .memctrl import addr_bits

__all__ = ["DMA_GO", "DMA_WRITE", "DMA_PATH", "DMA_GROUPS", "DMA_ADDR", "DMA_LEN", "DMA_DONE",
           "DMA_CYCLES", "DMA_ERROR", "MEM_SEL", "MEM_LO", "MEM_HI", "MEM_DIR", "MEM_GO",
           "MEM_ACK", "MEM_BINARY", "MEM_SEL_BITS", "MEM_INDEX_BITS", "CLOCK", "RESET",
           "dma_path_code", "CONTROL", "control_ports", "LATCHED", "CONSTANT", "driven_ports",
           "tb_ports", "CommandKind", "MARK_KIND", "MARK_CALL", "MARK_BUFFER", "MARK_SEQ",
           "WAVES_OFF", "MARK_PORTS", "NO_BUFFER"]

#: The testbench's clock (its only Verilog port) and the reset it generates itself.
CLOCK, RESET = "clk", "rst"

# -- host DMA engines ---------------------------------------------------------------------------
DMA_GO, DMA_WRITE, DMA_PATH, DMA_GROUPS = "dma_go", "dma_write", "dma_path", "dma_groups"
DMA_ADDR, DMA_LEN = "dma_addr", "dma_len"
DMA_DONE, DMA_CYCLES, DMA_ERROR = "dma_done", "dma_cycles", "dma_error"

# -- bulk back door -----------------------------------------------------------------------------
MEM_SEL, MEM_LO, MEM_HI, MEM_DIR = "mem_sel", "mem_lo", "mem_hi", "mem_dir"
MEM_GO, MEM_ACK, MEM_BINARY = "mem_go", "mem_ack", "mem_binary"
#: Width of ``mem_sel``: Group ``g``'s backing store is ``g``, its staging memory ``groups + g``.
MEM_SEL_BITS = 8
#: Width of ``mem_lo`` / ``mem_hi`` (word indices into a memory).
MEM_INDEX_BITS = 32

# -- command track (the waves' markers) ------------------------------------------------------


class CommandKind(enum.IntEnum):
    """The host command ``mark_kind`` names: the driver sets it as each command starts.

    The names are the device commands' ``kind`` (``mlsdk.device.commands``; a test holds the
    two together); NONE until the first command.
    """

    NONE = 0
    HostWrite = 1
    HostRead = 2
    Convert = 3
    Launch = 4
    Bind = 5


#: The command track: the running command's kind, the call it belongs to (1, 2, ...; see
#: ``docs/cosim.md``), the buffer it moves (its ``id``; a Convert's destination, a Launch's
#: first output), and a sequence number that changes at every command (a marker even between
#: two equal commands).
MARK_KIND, MARK_CALL, MARK_BUFFER, MARK_SEQ = "mark_kind", "mark_call", "mark_buffer", "mark_seq"
#: 1 pauses the dump (``$dumpoff`` on Icarus, no ``dump()`` in Verilator's loop): a window.
WAVES_OFF = "waves_off"
#: ``mark_buffer`` when the command moves no buffer (all ones).
NO_BUFFER = (1 << 32) - 1
#: The command track's ports and widths.
MARK_PORTS = {MARK_KIND: max(CommandKind).bit_length(), MARK_CALL: 16, MARK_BUFFER: 32,
              MARK_SEQ: 32, WAVES_OFF: 1}

#: Outputs of ``cosim_tb`` it holds in registers.
LATCHED = (DMA_DONE, DMA_CYCLES, DMA_ERROR, MEM_ACK)
#: Constant outputs of ``cosim_tb`` (read-only through VPI): the back-door file's format.
CONSTANT = (MEM_BINARY,)


def dma_path_code(path: str) -> int:
    """The ``dma_path`` value that selects the ``path`` ports (its index in ``TOP_PATHS``)."""
    if path not in TOP_PATHS:
        raise ValueError(f"DMA path must be one of {TOP_PATHS}, not {path!r}")
    return TOP_PATHS.index(path)


#: The testbench's own ports, in declaration order, and their direction.
CONTROL = {
    DMA_GO: "in", DMA_WRITE: "in", DMA_PATH: "in", DMA_GROUPS: "in", DMA_ADDR: "in",
    DMA_LEN: "in", DMA_DONE: "out", DMA_CYCLES: "out", DMA_ERROR: "out",
    MEM_SEL: "in", MEM_LO: "in", MEM_HI: "in", MEM_DIR: "in", MEM_GO: "in", MEM_ACK: "out",
    MEM_BINARY: "out",
    **dict.fromkeys(MARK_PORTS, "in"),
}


def control_ports(config: ArchConfig) -> dict[str, tuple[str, int]]:
    """The DMA and back-door ports, in declaration order: name -> (``"in"``/``"out"``, width)."""
    groups, aw = config.groups, addr_bits(config)
    widths = {
        DMA_GO: 1, DMA_WRITE: 1, DMA_PATH: max(1, (len(TOP_PATHS) - 1).bit_length()),
        DMA_GROUPS: groups, DMA_ADDR: aw, DMA_LEN: aw,
        DMA_DONE: 1, DMA_CYCLES: COUNTER_BITS, DMA_ERROR: groups,
        MEM_SEL: MEM_SEL_BITS, MEM_LO: MEM_INDEX_BITS, MEM_HI: MEM_INDEX_BITS, MEM_DIR: 1,
        MEM_GO: 1, MEM_ACK: 1, MEM_BINARY: 1, **MARK_PORTS,
    }
    return {name: (direction, widths[name]) for name, direction in CONTROL.items()}


def tb_ports(config: ArchConfig) -> dict[str, tuple[str, int]]:
    """Every signal of ``cosim_tb`` a simulator binding uses: the co-simulation top's ports,
    the testbench's own, and its reset (an output: the testbench generates it)."""
    return {**cosim_ports(config), **control_ports(config), RESET: ("out", 1)}


def driven_ports(config: ArchConfig) -> list[str]:
    """The inputs a simulator binding writes (through VPI: ``cosim_tb`` keeps them in
    registers), design and testbench ones alike."""
    return [name for name, (direction, _) in tb_ports(config).items() if direction == "in"]
