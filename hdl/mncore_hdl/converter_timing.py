"""Analytic cycle model of the layout converter on the memory-system top (pure Python).

``conversion_cycles(config, descriptor)`` is what the functional device model charges for a
``Convert``. It follows the converter's structure (``mncore_hdl.converter``): the descriptor is
compiled into blocks exactly as the hardware runs them; block ``b``'s reads overlap block
``b - 1``'s gather and writes (double buffer). Each such stage lasts as long as its busiest
resource: the read-data path (one LW per cycle), the write path (one LW per cycle) and each
Group's data bus (that Group's reads, rounded to whole DRAM bursts, plus its writes; slower
when the block also reads other Groups, whose in-order return the shared Group holds up).
The constants are calibrated against the RTL with ``bench/bench_converter.py`` (worst case
10.6%, mean 4%, on its table); refresh is charged as a fixed fraction of the time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .arch import ArchConfig
from .converter.program import DEFAULT_BUFFER_LW, ConverterProgram, _walk, compile_program
from .layout.conversion import ConversionDescriptor

__all__ = ["conversion_cycles", "BlockTraffic", "block_traffic", "START_CYCLES",
           "FILL_CYCLES", "BURST_COST", "SHARED_BUS_FACTOR"]

#: Register check and engine start before the first request.
START_CYCLES = 10
#: Cycles from the first read request to its data, and from the last gather to the last write.
FILL_CYCLES = 30
#: Extra read-path cycles per read burst (0: requests are pipelined, 8 outstanding).
BURST_COST = 0.0
#: Data-bus cycles per LW on a Group that is written while the block also reads other Groups:
#: read beats return in request order, so the shared Group's slower reads hold up the others.
SHARED_BUS_FACTOR = 1.2


@dataclass(frozen=True)
class BlockTraffic:
    """What one block moves: LWs read per Group (and in DRAM bursts), bursts, LWs written."""

    reads: dict[int, int]
    bus_reads: dict[int, int]
    bursts: int
    writes: dict[int, int]


def block_traffic(prog: ConverterProgram, burst_length: int = 8) -> list[BlockTraffic]:
    """Per-block traffic of a compiled program, in execution order.

    ``bus_reads`` rounds each read burst up to whole DRAM bursts (``burst_length`` LWs), the
    data-bus time a short burst costs.
    """
    blocks = []
    per_block_writes = prog.write_lw / max(1, prog.blocks)
    for ob in _walk(prog.outer, 5 + len(prog.dims)):
        reads: dict[int, int] = defaultdict(int)
        bus: dict[int, int] = defaultdict(int)
        bursts = 0
        for rd in _walk(prog.read, 2):
            g, a = ob[0] + rd[0], ob[1] + rd[1]
            if 0 <= g < prog.src_groups and 0 <= a < prog.src_lw_per_group:
                n = min(prog.burst, prog.src_lw_per_group - a)
                reads[g] += n
                bus[g] += -(-n // burst_length) * burst_length
                bursts += 1
        # The writer also fills gaps and padding: the footprint spreads over the blocks.
        blocks.append(BlockTraffic(dict(reads), dict(bus), bursts,
                                   {ob[3]: round(per_block_writes)}))
    return blocks


def _stage(block: BlockTraffic | None, writes: dict[int, int]) -> float:
    reads = block.reads if block else {}
    bus_reads = block.bus_reads if block else {}
    read_path = sum(reads.values()) + BURST_COST * (block.bursts if block else 0)
    write_path = sum(writes.values())
    bus = 0.0
    for g in set(bus_reads) | set(writes):
        r, w = bus_reads.get(g, 0), writes.get(g, 0)
        shared = r and w and len(bus_reads) > 1
        bus = max(bus, (r + w) * (SHARED_BUS_FACTOR if shared else 1.0))
    return max(read_path, write_path, bus)


def conversion_cycles(config: ArchConfig, descriptor: ConversionDescriptor,
                      buffer_lw: int = DEFAULT_BUFFER_LW) -> int:
    """Cycles the RTL converter takes for ``descriptor`` (start to ``done``), modeled.

    Parameters
    ----------
    config : ArchConfig
        The chip (DRAM burst length and refresh timing).
    descriptor : ConversionDescriptor
        From :func:`mncore_hdl.layout.conversion`.
    buffer_lw : int
        The converter's buffer (the RTL default).
    """
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if not isinstance(descriptor, ConversionDescriptor):
        raise TypeError(f"Descriptor must be a ConversionDescriptor, not {descriptor!r}")
    prog = compile_program(descriptor, config, buffer_lw)
    total: float = START_CYCLES + FILL_CYCLES
    previous: dict[int, int] = {}
    for block in block_traffic(prog, config.timing.burst_length):
        total += _stage(block, previous)
        previous = block.writes
    total += _stage(None, previous)
    t = config.timing
    refresh = t.trp + t.trfc + t.trcd
    return round(total / (1.0 - refresh / t.trefi))
