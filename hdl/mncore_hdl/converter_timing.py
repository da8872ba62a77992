"""Analytic cycle model of the layout converter on the memory-system top (pure Python).

``conversion_cycles(config, descriptor)`` is what the functional device model charges for a
``Convert``. It follows the converter's structure (``mncore_hdl.converter``): the descriptor is
compiled into blocks exactly as the hardware runs them; block ``b``'s reads overlap block
``b - 1``'s gather and writes (double buffer). Each such stage lasts as long as its busiest
resource: the read-data path (one LW per cycle, plus a cost per burst), the write path (one
LW per cycle) and each Group's data bus (shared by that Group's reads and writes, with a
read/write turnaround cost). The constants are calibrated against the RTL with
``bench/bench_converter.py``; refresh is charged as the controller model does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .arch import ArchConfig
from .converter.program import DEFAULT_BUFFER_LW, ConverterProgram, _walk, compile_program
from .layout.conversion import ConversionDescriptor

__all__ = ["conversion_cycles", "BlockTraffic", "block_traffic", "START_CYCLES",
           "BURST_COST", "BUS_FACTOR", "FILL_CYCLES"]

#: Register check and engine start before the first request.
START_CYCLES = 10
#: Extra read-path cycles per read burst (request issue and return gaps of short bursts).
BURST_COST = 2.0
#: Data-bus cycles per LW on a Group that both reads and writes in one stage (turnarounds,
#: row changes between the two streams).
BUS_FACTOR = 1.15
#: Cycles from the first read request to its data, and from the last gather to the last write.
FILL_CYCLES = 40


@dataclass(frozen=True)
class BlockTraffic:
    """What one block moves: LWs read per Group, read bursts, LWs written per Group."""

    reads: dict[int, int]
    bursts: int
    writes: dict[int, int]


def block_traffic(prog: ConverterProgram) -> list[BlockTraffic]:
    """Per-block traffic of a compiled program, in execution order."""
    blocks = []
    for ob in _walk(prog.outer, 5 + len(prog.dims)):
        reads: dict[int, int] = defaultdict(int)
        bursts = 0
        for rd in _walk(prog.read, 2):
            g, a = ob[0] + rd[0], ob[1] + rd[1]
            if 0 <= g < prog.src_groups and 0 <= a < prog.src_lw_per_group:
                reads[g] += min(prog.burst, prog.src_lw_per_group - a)
                bursts += 1
        blocks.append(BlockTraffic(dict(reads), bursts, {ob[3]: prog.block_write_lw}))
    # The writer also fills gaps and padding LWs: spread the footprint over the blocks.
    total = sum(sum(b.writes.values()) for b in blocks)
    scale = prog.write_lw / total if total else 0.0
    return [BlockTraffic(b.reads, b.bursts, {g: round(n * scale) for g, n in b.writes.items()})
            for b in blocks]


def _stage(reads: dict[int, int], bursts: int, writes: dict[int, int]) -> float:
    read_path = sum(reads.values()) + BURST_COST * bursts
    write_path = sum(writes.values())
    bus = 0.0
    for g in set(reads) | set(writes):
        r, w = reads.get(g, 0), writes.get(g, 0)
        bus = max(bus, (r + w) * (BUS_FACTOR if r and w else 1.0))
    return max(read_path, write_path, bus)


def conversion_cycles(config: ArchConfig, descriptor: ConversionDescriptor,
                      buffer_lw: int = DEFAULT_BUFFER_LW) -> int:
    """Cycles the RTL converter takes for ``descriptor`` (start to ``done``), modeled.

    Parameters
    ----------
    config : ArchConfig
        The chip (DRAM timing for refresh, row size for bursts).
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
    blocks = block_traffic(prog)
    total = START_CYCLES + FILL_CYCLES
    previous: dict[int, int] = {}
    for block in blocks:
        total += _stage(block.reads, block.bursts, previous)
        previous = block.writes
    total += _stage({}, 0, previous)
    t = config.timing
    refresh = t.trp + t.trfc + t.trcd
    return round(total / (1.0 - refresh / t.trefi))
