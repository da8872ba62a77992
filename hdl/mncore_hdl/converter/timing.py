"""Analytic cycle model of the layout converter on the memory-system top (pure Python).

``conversion_cycles(config, descriptor)`` is what the functional device model charges for a
``Convert``. It compiles the descriptor into blocks exactly as the hardware runs them and
replays, burst by burst, the few rules of the RTL (``mncore_hdl.converter``) that set the time:

- each Group has its own read stream (its own request queue, bursts in flight and buffer
  write port), one LW per cycle: reads of different Groups overlap; the first beat comes
  ``FIRST_BEAT_CYCLES`` after the request, and a Group's controller runs ``PREFETCH_LW`` beats
  ahead of the reader (its read-FIFO credits);
- the reader claims a buffer half as soon as the gather releases it (block ``b + 2`` is issued
  when block ``b`` is released and the walk has passed all of block ``b + 1``); the walk puts
  one burst a cycle into its Group's queue and waits only while that Group has ``AHEAD``
  bursts neither in nor done (``QUEUED`` queued + ``OUTSTANDING`` in flight);
- the gather starts a block once it is full and the previous one is released; its first write
  beat follows ``GATHER_CYCLES`` later (``GATHER_ASSURED_CYCLES`` for the last block: with
  every read in, the writer asks before its beats are buffered), and it releases the half
  when the writer's FIFOs hold the rest of the block (``WRITE_SLACK_LW``);
- the gather walks every destination position of a block, one a cycle, all-padding ones
  included (they are dropped): a block's last write and its release wait for the walk. A block
  writes the destination from its base to the next block's (the writer fills gaps), so with a
  padded shape the last row-tile block may write little yet take as long as a full one;
- the writer is one serial stream at one LW per cycle;
- each Group's converter port serves its requests in order, and the writer wins the port: a
  read queued behind a Group's writes waits for them (and for tWR), writes queued behind a
  read wait until the reader has taken that read. The writer keeps a request up whenever it
  holds a burst's beats, so while it streams into a Group (block ``b``, then block ``b + 1``
  already full) the port never frees for the reader: block ``b + 2``'s reads of that Group
  enter the port only when the writer has written all it holds (``split``, ``late``). Only
  they wait: the block's other Groups read at once, unless the held Group's queue fills
  (more than ``QUEUED`` of its bursts in the block), which stops the walk until it drains.
  On one engine the router holds that Group's reads while the gather streams a full block
  (``hold``): they enter as the gather finishes it, their row opens under the writer's last
  bursts, and the first read beat follows the last write beat by tWTR + CL only;
- a read burst shorter than a DRAM row whose successor in the walk is not the next LWs (a
  column walk: the transposes) opens a row each time; the controller prepares at most its
  queue's worth of such chunks at once, so the Group's read stream takes at least
  :func:`row_miss_gap` per burst (the row's preparation shared by the chunks the controller
  queues), while its bus stays free for the writer's beats in between;
- refresh (all Groups at once, every tREFI) stalls the converter for tRP + tRFC + tRCD + CL,
  charged as the expected fraction of the time.

The replay as written (:func:`block_traffic`, one block after another) is kept as the reference
(``replay_cycles(..., reference=True)``). ``conversion_cycles`` takes the traffic from numpy
(:func:`block_traffic_fast`: blocks carry Groups and LW counts only, so a conversion has a few
distinct ones) and skips whole periods once the replay's state repeats, shifted in time, with
the same blocks ahead: every rule is a max, a sum or a comparison of times, so a shifted state
evolves shifted, and the result is the reference's exactly
(tests/hdl/test_converter_timing_fast.py).

Checked against the RTL with ``bench/bench_converter.py`` (figures in
``docs/layout_converter.md``). Padded native->host fp32 shapes other than the bench's were
measured once, before the per-Group read streams: (65, 33), (17, 130), (50, 70), (100, 40)
within 3%, but (40, 100) +14% and (130, 130) -8%: how the writer's gaps (padding it skips) let
reads of a shared Group in is not modeled.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np

from ..arch import ArchConfig
from ..layout.conversion import ConversionDescriptor
from ..memctrl.timing import READ_RETURN, REQUEST_TO_PREPARE, mixed_cycles, refresh_cost
from .program import (
    DEFAULT_BUFFER_LW,
    READ_OUTSTANDING,
    READ_QUEUED,
    ConverterProgram,
    compile_program,
)
from .traffic import BlockTraffic, block_traffic, block_traffic_fast, converter_beats

__all__ = ["conversion_cycles", "BlockTraffic", "block_traffic", "block_traffic_fast",
           "converter_beats", "replay_cycles", "FIRST_BEAT_CYCLES",
           "PREFETCH_LW", "GATHER_CYCLES", "GATHER_ASSURED_CYCLES", "WRITE_SLACK_LW",
           "OUTSTANDING", "refresh_stall", "row_miss_gap"]

#: Start of the run to the first read beat (claim, request, port queue, ACT, tRCD, CL, FIFO).
FIRST_BEAT_CYCLES = 33
#: Beats a Group's controller reads ahead of the converter taking them: its read FIFO
#: (CL + 2 bursts + 8) less one burst (a chunk is issued only with room for all its beats).
PREFETCH_LW = 28
#: A block full to its first write beat: gather pipeline plus one 32-LW write burst buffered.
GATHER_CYCLES = 38
#: The same for the engine's last block: its reads are all in, so the writer asks for its
#: bursts before their beats are buffered (``WriteEngine.assured``) and the controller opens
#: the row while the gather streams: the pipeline alone.
GATHER_ASSURED_CYCLES = GATHER_CYCLES - 32
#: LWs of a block the gather may run ahead of the writer (write beat FIFO 64, produced FIFO 8,
#: pipeline): the gather releases the buffer half that much before the block's last write.
WRITE_SLACK_LW = 80
#: The gather's last position to the block's last write beat (pipeline, FIFO, request).
GATHER_DRAIN = 12
#: Cycles from a write request to its first beat on the port (queue, chunker, FIFO).
WRITE_REQUEST_LEAD = 6
#: Read bursts the walk keeps ahead of a Group's last beat taken (its request queue, then its
#: bursts in flight: ``program.READ_QUEUED`` and ``READ_OUTSTANDING``, as the RTL).
QUEUED = READ_QUEUED
OUTSTANDING = READ_OUTSTANDING
AHEAD = QUEUED + OUTSTANDING
#: The in-order controller's queue to chunker hand-off, in a column walk (``row_miss_gap``).
QUEUE_HANDOFF = 1
#: A split program's Groups' mixed streams start later than a lone stream: no engine writes
#: before its first block is in and gathered (the reads' start is in ``mixed_cycles``).
SPLIT_START = GATHER_CYCLES


def row_miss_gap(config: ArchConfig, prog: ConverterProgram) -> float:
    """Least cycles between the first beats of two read bursts of one Group, or 0.

    Non-zero when every burst of the walk opens a row: bursts shorter than a DRAM row whose
    next burst is not the next LWs (the read table's innermost address carry differs from the
    burst: a column walk, as in the transposes; consecutive bursts rotate over the banks). The
    controller prepares a queued chunk (``REQUEST_TO_PREPARE``, tRP, ACT, tRCD) while the
    chunks ahead of it stream, but holds only a few, so a burst takes its beats or that
    preparation shared by the bursts queued, whichever is longer. In order: two requests,
    the queue entry (prepared) and the chunker's (streaming); the next request enters the
    queue only once the chunker has issued the last chunk of its request and taken the
    queue's (``QUEUE_HANDOFF``), so two bursts take the preparation, the hand-off and the
    chunks after the first (16-LW bursts: 17 cycles a burst, the 1 MiB transpose's reads
    alternating 16 and 18; 8-LW bursts: 13). ``fr_fcfs``: its window and the chunker share the
    preparation. (Unlike random bursts, ``memctrl.timing.random_chunk_gap``, no bank is hit
    twice in a row and the PRE/ACT slots overlap the other banks' columns: no
    ``MISS_OVERHEAD``.)
    """
    if prog.burst >= config.row_lw or not prog.read or prog.read[0].carries[1] == prog.burst:
        return 0.0
    t = config.timing
    if config.scheduler == "fr_fcfs":
        prepare = (REQUEST_TO_PREPARE + t.trp + t.trcd) / (config.scheduler_window + 1)
    else:
        tail = max(0, prog.burst - t.burst_length)
        prepare = (REQUEST_TO_PREPARE + t.trp + t.trcd + QUEUE_HANDOFF + tail) / 2
    return max(prepare, float(prog.burst))


def refresh_stall(config: ArchConfig) -> int:
    """Cycles one refresh stops the converter: precharge, tRFC, then ACT and CAS latency again."""
    t = config.timing
    return t.trp + t.trfc + t.trcd + t.cl


#: A block whose late bursts wait for the writer: (block, bursts, issue time, last beat of its
#: early bursts), or None.
_Pending = tuple[int, list[tuple[int, int, int]], float, float] | None


class _Replay:
    """The burst-level replay of one conversion (see the module docstring)."""

    def __init__(self, config: ArchConfig, blocks: list[BlockTraffic],
                 ids: np.ndarray | None = None, miss_gap: float = 0.0, held: bool = False):
        self.blocks = blocks
        #: one engine alone: the Group its gather streams into shows no new read (``hold``)
        self.held = held
        #: a Group's first read beat after its last write beat: the read's whole latency and
        #: tWR; held, its request entered the port as the gather finished the block and the
        #: row opened under the writer's last bursts: only tWTR, CL and the return are left
        t = config.timing
        self.read_after_write = (t.twtr + t.cl + READ_RETURN + 1 if held
                                 else FIRST_BEAT_CYCLES + t.twr)
        #: least cycles a Group's read burst holds its read stream (``row_miss_gap``)
        self.miss_gap = miss_gap
        #: Each block's traffic as a number (equal blocks, equal numbers): when given, the
        #: replay skips whole periods of a repeating steady state (see :meth:`_skip`).
        self.ids = ids
        self.twr = config.timing.twr
        n = len(blocks)
        self.bus: dict[int, float] = defaultdict(float)     # a Group's queued work ends
        self.wrote: dict[int, bool] = defaultdict(bool)     # ... and it was a write
        self.wend: dict[int, float] = defaultdict(float)    # a Group's last write ends
        self.rend: dict[int, float] = defaultdict(float)    # a Group's read stream ends
        self.writer = 0.0
        self.released = 0.0
        self.requested = 0.0                                # the walk's latest step
        #: per Group, the last beat of its latest bursts (at most AHEAD kept)
        self.consumed: dict[int, list[float]] = defaultdict(list)
        self.full = [0.0] * n

    def read(self, g: int, lw: int, issue: float) -> float:
        """One burst on Group ``g``'s read stream; returns when its last beat is in."""
        start = max(self.rend[g], issue + FIRST_BEAT_CYCLES,
                    self.bus[g] + (self.read_after_write if self.wrote[g] else 0))
        self.rend[g] = start + max(lw, self.miss_gap)
        self.bus[g] = start + lw - PREFETCH_LW
        self.wrote[g] = False
        taken = self.consumed[g]
        taken.append(self.rend[g])
        del taken[:-AHEAD]
        return self.rend[g]

    def read_all(self, bursts, issue: float, end: float = 0.0) -> float:
        """Bursts in walk order from ``issue`` on: a burst is walked once its Group has room
        (the burst ``AHEAD`` places before it in that Group is in); returns the block's last
        beat (at least ``end``)."""
        walked = issue
        for g, lw in bursts:
            taken = self.consumed[g]
            walked = max(walked, taken[-AHEAD] if len(taken) >= AHEAD else 0.0)
            end = max(end, self.read(g, lw, walked))
        self.requested = max(self.requested, walked)
        return end

    def split(self, b: int, issue: float, nxt: int):
        """Block ``b``'s bursts queued ahead of block ``nxt``'s writes, and those behind them."""
        if nxt >= len(self.blocks):
            return list(self.blocks[b].reads), []
        wgroups = {g for g, _ in self.blocks[nxt].writes}
        # the writer's first request of block nxt (a few cycles before its first beat)
        requests = max(self.full[nxt], self.released) + GATHER_CYCLES - WRITE_REQUEST_LEAD
        early: list[tuple[int, int]] = []
        late: list[tuple[int, int, int]] = []  # (Group, LWs, the Group the walk waits for)
        held: dict[int, int] = defaultdict(int)  # a held Group's bursts in its queue
        stopper = -1  # the held Group whose full queue stops the walk
        for g, lw in self.blocks[b].reads:
            # the writer is still streaming block nxt - 1 into g, and goes on into block nxt
            streaming = self.wend[g] > issue
            if stopper >= 0 or held[g] or (g in wgroups and (issue >= requests or streaming)):
                held[g] += 1
                if stopper < 0 and held[g] > QUEUED:
                    stopper = g
                late.append((g, lw, stopper))
            else:
                early.append((g, lw))
        return early, late

    def write(self, b: int) -> None:
        begin = max(self.full[b], self.released)
        visits = self.blocks[b].visits
        total = sum(lw for _, lw in self.blocks[b].writes)
        lead = GATHER_ASSURED_CYCLES if b == len(self.blocks) - 1 else GATHER_CYCLES
        for g, lw in self.blocks[b].writes:
            start = max(self.writer, begin + lead, self.bus[g])
            self.writer = start + lw
            self.bus[g] = self.wend[g] = self.writer
            self.wrote[g] = True
        # the gather walks every position of the block, one a cycle, padding included: the
        # block's last LW (or the writer's word that no more come) waits for the walk
        self.writer = max(self.writer, begin + visits + GATHER_DRAIN)
        self.released = max(begin + max(total, visits), self.writer - WRITE_SLACK_LW)

    def late(self, late, issue: float, end: float) -> float:
        """A block's bursts held behind the writer: a held Group's reads enter its port once
        the writer's stream into it stops (it has written all it holds; on one engine, once
        the gather has finished the block it streams: the router's ``hold``); bursts the
        walk reaches only after a full queue wait for that Group. Returns the block's last
        beat."""
        resume = issue
        for g, lw, stopper in late:
            if stopper >= 0:
                resume = max(resume, self.wend[stopper])
            shown = self.released if self.held else self.wend[g]
            t = max(issue, shown) if self.wend[g] > issue else issue
            end = max(end, self.read(g, lw, max(t, resume if stopper >= 0 else issue)))
        self.requested = max(self.requested, resume)
        return end

    def run(self) -> float:
        n = len(self.blocks)
        self.full[0] = self.read_all(self.blocks[0].reads, 0.0)
        pending: _Pending = None
        if n > 1:
            early, late = self.split(1, 0.0, 0)
            got = self.read_all(early, 0.0)
            pending = (1, late, 0.0, got)
            if not late:
                self.full[1] = got
        seen: dict = {}
        b = 0
        while b < n:
            self.write(b)
            if pending is not None and pending[0] == b + 1:
                _, late, issue, got = pending
                self.full[b + 1] = self.late(late, issue, got)
                pending = None
            if b + 2 < n:
                # block b's half is free and the walk has reached the end of block b + 1:
                # block b + 2 is issued
                issue = max(self.released, self.requested)
                early, late = self.split(b + 2, issue, b + 1)
                got = self.read_all(early, issue)
                if late:
                    pending = (b + 2, late, issue, got)
                else:
                    self.full[b + 2] = got
            if self.ids is not None and b + 3 < n:
                b, pending = self._skip(b, pending, seen)
            b += 1
        return max(self.writer, *self.rend.values())

    # -- skipping a repeating steady state ----------------------------------------------------
    #
    # Every rule above is a max or a sum of times, or a comparison of two times, so the replay
    # commutes with a shift of all times. When the state after block b is the state after an
    # earlier block b - p shifted by d (times that can no longer win a max or a comparison
    # left out), and the blocks ahead repeat those p places before them, each of the next
    # periods repeats the last one shifted by d: the replay jumps over them, exactly.

    def _alive(self, pending: _Pending) -> float:
        """No later burst is walked before this (every issue to come is at least it)."""
        return self.released if pending is None else min(self.released, pending[2])

    def _live(self, alive: float):
        """Which times can still win a max or a comparison: per quantity, a predicate."""
        return {
            "bus": lambda t: t > min(alive - self.twr, self.writer),
            "rend": lambda t: t > alive + FIRST_BEAT_CYCLES,
            "wend": lambda t: t >= alive,
            "consumed": lambda t: t > alive,
        }

    def _signature(self, b: int, pending: _Pending) -> tuple:
        """The state after block ``b`` relative to the writer, dead times left out."""
        ref = self.writer
        live = self._live(self._alive(pending))
        bus = tuple(sorted((g, t - ref, self.wrote[g]) for g, t in self.bus.items()
                           if live["bus"](t)))
        rend = tuple(sorted((g, t - ref) for g, t in self.rend.items() if live["rend"](t)))
        wend = tuple(sorted((g, t - ref) for g, t in self.wend.items() if live["wend"](t)))
        consumed = tuple(sorted(
            (g, tuple(t - ref if live["consumed"](t) else None for t in ts))
            for g, ts in self.consumed.items()))
        full = (self.full[b + 1] - ref,
                None if pending is not None else self.full[b + 2] - ref)
        late = None if pending is None else (pending[0] - b, tuple(pending[1]),
                                             pending[2] - ref, pending[3] - ref)
        return (bus, rend, wend, consumed, full, late, self.released - ref,
                # requested is only read as max(released, requested) (or right after it is set)
                max(self.requested, self.released) - ref)

    def _skip(self, b: int, pending: _Pending, seen: dict) -> tuple[int, _Pending]:
        sig = self._signature(b, pending)
        before = seen.get(sig)
        seen[sig] = (b, self.writer)
        if before is None:
            return b, pending
        p = b - before[0]
        ids = self.ids
        assert ids is not None
        # blocks b + 1 .. last + 2 must repeat those p before them, and last + 2 < n
        n = len(self.blocks)
        ahead = ids[b + 1:n] != ids[b + 1 - p:n - p]
        limit = int(np.argmax(ahead)) + b + 1 if ahead.any() else n
        periods = (min(limit, n) - 3 - b) // p
        if periods <= 0:
            return b, pending
        shift = periods * (self.writer - before[1])
        self._shift(shift, self._alive(pending))
        last = b + periods * p
        self.full[last + 1] = self.full[b + 1] + shift
        if pending is None:
            self.full[last + 2] = self.full[b + 2] + shift
        else:
            pending = (pending[0] + periods * p, pending[1], pending[2] + shift,
                       pending[3] + shift)
        seen.clear()
        return last, pending

    def _shift(self, d: float, alive: float) -> None:
        live = self._live(alive)
        for name in ("bus", "rend", "wend"):
            times = getattr(self, name)
            for g, t in times.items():
                if live[name](t):
                    times[g] = t + d
        for ts in self.consumed.values():
            ts[:] = [t + d if live["consumed"](t) else t for t in ts]
        self.writer += d
        self.released += d
        self.requested += d


def conversion_cycles(config: ArchConfig, descriptor: ConversionDescriptor,
                      buffer_lw: int = DEFAULT_BUFFER_LW, *, src_group: int = 0,
                      dst_group: int = 0, refreshes: int | None = None) -> int:
    """Cycles the RTL converter takes for ``descriptor`` (start to ``done``), modeled.

    Parameters
    ----------
    config : ArchConfig
        The chip (DRAM timing and refresh).
    descriptor : ConversionDescriptor
        From :func:`mncore_hdl.layout.conversion`.
    buffer_lw : int
        The converter's buffer (the RTL default).
    src_group, dst_group : int
        First Group of the source and destination buffers: where both touch one Group, its
        data bus carries reads and writes alike.
    refreshes : int, optional
        Charge this many refreshes (``refresh_stall`` each) rather than refresh's expected
        share (the default, what the functional model charges): a conversion of a few
        thousand cycles meets a whole refresh or none, so one run of the RTL is compared
        with the model at the refreshes it met (``bench/bench_converter.py``).
    """
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if not isinstance(descriptor, ConversionDescriptor):
        raise TypeError(f"Descriptor must be a ConversionDescriptor, not {descriptor!r}")
    if refreshes is not None and (isinstance(refreshes, bool) or not isinstance(refreshes, int)
                                  or refreshes < 0):
        raise ValueError(f"Refreshes must be None or a non-negative integer, not {refreshes!r}")
    return _conversion_cycles(config, descriptor, buffer_lw, src_group, dst_group, refreshes)


@lru_cache(maxsize=256)
def _conversion_cycles(config: ArchConfig, descriptor: ConversionDescriptor, buffer_lw: int,
                       src_group: int, dst_group: int, refreshes: int | None) -> int:
    """:func:`conversion_cycles`, memoised: a pure function of frozen arguments."""
    prog = compile_program(descriptor, config, buffer_lw)
    return replay_cycles(config, prog, src_group, dst_group, refreshes=refreshes)


def replay_cycles(config: ArchConfig, prog: ConverterProgram, src_group: int = 0,
                  dst_group: int = 0, *, reference: bool = False,
                  refreshes: int | None = None) -> int:
    """The replay's cycles for a compiled program, refresh included (its expected share, or
    ``refreshes`` whole ones: :func:`conversion_cycles`).

    ``reference=True`` replays every block of :func:`block_traffic` one by one (the model as
    written); by default the traffic comes from :func:`block_traffic_fast` and repeating
    periods of the steady state are skipped, with the same result.
    """
    gap = row_miss_gap(config, prog)
    stall, trefi = refresh_stall(config), config.timing.trefi

    def refreshed(raw: float) -> float:
        return raw / (1.0 - stall / trefi) if refreshes is None else raw + refreshes * stall

    engines = []
    reads: dict[int, int] = defaultdict(int)
    writes: dict[int, int] = defaultdict(int)
    for k in range(prog.engines):
        if reference:
            blocks = block_traffic(prog, src_group, dst_group, k)
            total = _Replay(config, blocks, miss_gap=gap, held=prog.engines == 1).run()
        else:
            distinct, ids = block_traffic_fast(prog, src_group, dst_group, k)
            blocks = [distinct[i] for i in ids.tolist()]
            total = _Replay(config, blocks, ids, miss_gap=gap, held=prog.engines == 1).run()
        engines.append(refreshed(total))
        if prog.engines > 1:
            for block in blocks:
                for g, lw in block.reads:
                    reads[g] += lw
                for g, lw in block.writes:
                    writes[g] += lw
    # engines run at once and share the Groups' buses: each Group's controller serves all
    # engines' reads there and its writer's writes, as one mixed stream (its refresh share
    # is memctrl's; taken out again to charge whole refreshes)
    cost = (refresh_cost(config, write=False) + refresh_cost(config, write=True)) / 2
    start = GATHER_ASSURED_CYCLES if prog.blocks == prog.engines else SPLIT_START
    shared = [start + (float(mixed_cycles(config, reads[g], writes[g])) if refreshes is None
                       else refreshed(mixed_cycles(config, reads[g], writes[g])
                                      * (1.0 - cost / trefi)))
              for g in set(reads) | set(writes)]
    return round(max(engines + shared))
