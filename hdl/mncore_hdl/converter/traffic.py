"""What the layout converter moves, block by block: the read bursts, the writes per Group and
the gather's visits of each block of a :class:`~.program.ConverterProgram` (:func:`block_traffic`,
the walk as written; :func:`block_traffic_fast`, the same from the walk table, with repeats
folded), and the beats a whole conversion reads and writes (:func:`converter_beats`).
:mod:`.timing` replays this traffic against the controller's timing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .program import ConverterProgram, engine_bases, walk_table

__all__ = ["BlockTraffic", "block_traffic", "block_traffic_fast", "converter_beats"]


@dataclass(frozen=True)
class BlockTraffic:
    """What one block moves: its read bursts ``(Group, LWs)`` in request order, LWs written per
    Group in destination order, and the destination positions its gather walks (one a cycle,
    all-padding ones included)."""

    reads: tuple[tuple[int, int], ...]
    writes: tuple[tuple[int, int], ...]
    visits: int = 0


def _split_writes(lo: int, hi: int, per_group: int, dst_group: int) -> list[tuple[int, int]]:
    """The destination span ``[lo, hi)`` (LW, Group-major) cut at Group boundaries:
    ``(group, lw)`` pieces, in order."""
    writes = []
    pos = lo
    while pos < hi:
        g = pos // per_group
        end = min(hi, (g + 1) * per_group)
        writes.append((dst_group + g, end - pos))
        pos = end
    return writes


def _engine_walk(prog: ConverterProgram, engine: int) -> tuple[tuple[int, ...], int, int]:
    """Engine ``engine``'s outer base and the destination span it writes, ``[lo, hi)`` LWs of
    the Group-major destination footprint (all of it on one engine, its Group when split)."""
    per_group = max(1, prog.dst_lw_per_group)
    if not 0 <= engine < prog.engines:
        raise ValueError(f"Engine must be in 0..{prog.engines - 1}, not {engine}")
    base = engine_bases(prog)[engine]
    if prog.engines == 1:
        return base, 0, prog.dst_groups * per_group
    return base, engine * per_group, (engine + 1) * per_group


def block_traffic(prog: ConverterProgram, src_group: int = 0,
                  dst_group: int = 0, engine: int = 0) -> list[BlockTraffic]:
    """Per-block traffic of engine ``engine`` of a compiled program, in execution order.

    Bursts clipped to the source footprint as the read engine clips them; bursts wholly
    outside it (only padding reaches them) are skipped. The writer also fills gaps and
    padding: a block writes the destination footprint from its own destination base to the
    next block's (blocks go in destination order), so a block that holds mostly padding (the
    last row-tile of a padded shape) writes little while its gather still walks all of its
    positions. Groups are absolute: ``src_group`` and ``dst_group`` are the buffers' first
    Groups (a Group that is both read and written shares its data bus between the two).
    """
    per_group = max(1, prog.dst_lw_per_group)
    base, start, footprint = _engine_walk(prog, engine)
    outers = [tuple(b + r for b, r in zip(base, ob, strict=True))
              for ob in walk_table(prog.outer, 5 + len(prog.dims))]
    bases = [min(footprint, max(start, ob[3] * per_group + ob[4])) for ob in outers]
    ends = [max(bases[i], bases[i + 1] if i + 1 < len(bases) else footprint)
            for i in range(len(bases))]
    visits = prog.block_write_lw
    blocks = []
    for ob, lo, hi in zip(outers, bases, ends, strict=True):
        reads = []
        for rd in walk_table(prog.read, 2):
            g, a = ob[0] + rd[0], ob[1] + rd[1]
            if 0 <= g < prog.src_groups and 0 <= a < prog.src_lw_per_group:
                reads.append((src_group + g, min(prog.burst, prog.src_lw_per_group - a)))
        writes = _split_writes(lo, hi, per_group, dst_group)
        if not writes:
            writes.append((dst_group + min(ob[3], prog.dst_groups - 1), 0))
        blocks.append(BlockTraffic(tuple(reads), tuple(writes), visits))
    return blocks


def _walk_array(table, nq: int) -> np.ndarray:
    """Every accumulator of a loop table (as :func:`walk_table` yields them), one row per step.

    Loop ``k`` (innermost first) advances at step ``s`` ``s // inner_k - s // inner_k+1``
    times, ``inner_k`` being the steps of the loops inside it; each advance adds its carries.
    """
    steps = 1
    for loop in table:
        steps *= loop.extent
    s = np.arange(steps, dtype=np.int64)
    acc = np.zeros((steps, nq), dtype=np.int64)
    inner = 1
    for loop in table:
        outer = inner * loop.extent
        advances = s // inner - s // outer
        acc += advances[:, None] * np.asarray(loop.carries, dtype=np.int64)[None, :]
        inner = outer
    return acc


def block_traffic_fast(prog: ConverterProgram, src_group: int = 0, dst_group: int = 0,
                       engine: int = 0) -> tuple[list[BlockTraffic], np.ndarray]:
    """:func:`block_traffic` with numpy, as the distinct blocks and each block's index in them.

    Blocks hold Groups and LW counts, no addresses, so a conversion has few distinct ones.
    Returns ``(distinct, ids)`` with ``block_traffic(...)[i] == distinct[ids[i]]``.
    """
    per_group = max(1, prog.dst_lw_per_group)
    base, start, footprint = _engine_walk(prog, engine)
    outers = _walk_array(prog.outer, 5 + len(prog.dims)) + np.asarray(base, dtype=np.int64)
    bases = np.clip(outers[:, 3] * per_group + outers[:, 4], start, footprint)
    nxt = np.append(bases[1:], footprint)
    ends = np.maximum(bases, nxt)
    rd = _walk_array(prog.read, 2)
    g = outers[:, 0:1] + rd[None, :, 0]
    a = outers[:, 1:2] + rd[None, :, 1]
    valid = (g >= 0) & (g < prog.src_groups) & (a >= 0) & (a < prog.src_lw_per_group)
    lw = np.minimum(prog.burst, prog.src_lw_per_group - a)
    # One row per block: each read as (Group or -1, LWs), then its writes when they stay in
    # one Group (first Group, LWs); rows of blocks whose writes cross Groups are made unique.
    first = bases // per_group
    one = (ends > bases) & ((ends - 1) // per_group == first)
    empty = ends == bases
    wg = np.where(empty, np.minimum(outers[:, 3], prog.dst_groups - 1), first)
    key = np.concatenate([np.where(valid, src_group + g, -1), np.where(valid, lw, 0),
                          (dst_group + wg)[:, None], (ends - bases)[:, None],
                          np.where(one | empty, -1, np.arange(len(bases)))[:, None]], axis=1)
    rows, first_of, ids = np.unique(key, axis=0, return_index=True, return_inverse=True)
    visits = prog.block_write_lw
    distinct = []
    for i in first_of.tolist():
        reads = tuple(zip((src_group + g[i][valid[i]]).tolist(), lw[i][valid[i]].tolist(),
                          strict=True))
        lo, hi = int(bases[i]), int(ends[i])
        if empty[i]:
            writes: tuple[tuple[int, int], ...] = ((dst_group + int(wg[i]), 0),)
        else:
            writes = tuple(_split_writes(lo, hi, per_group, dst_group))
        distinct.append(BlockTraffic(reads, writes, visits))
    return distinct, np.asarray(ids, dtype=np.int64).reshape(-1)


def converter_beats(prog: ConverterProgram) -> tuple[int, int]:
    """LWs the converter moves for a compiled program: ``(beats read, beats written)``.

    What the RTL's ``beats_read`` and ``beats_written`` counters end at. Reads: every block's
    read bursts, each clipped to the source footprint and skipped when wholly outside it (the
    read engine's rule; :func:`block_traffic`). So reads need not be the source footprint: a
    burst that runs on through padding (a sub-axis grown past its extent) reads the next row's
    LWs, which their own burst reads again, and LWs no burst reaches (gaps) are not read.
    Writes: the whole destination footprint, once (the writer fills gaps and padding with
    zeros).
    """
    read = 0
    for engine in range(prog.engines):
        distinct, ids = block_traffic_fast(prog, engine=engine)
        per_block = np.array([sum(lw for _, lw in b.reads) for b in distinct], dtype=np.int64)
        read += int(per_block[ids].sum()) if len(ids) else 0
    return read, prog.dst_groups * prog.dst_lw_per_group
