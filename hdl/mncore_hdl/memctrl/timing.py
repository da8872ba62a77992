"""Analytic timing model of the Group memory controller (pure Python, no Amaranth).

The functional device model uses it for *modeled cycles*; the RTL bench
(``bench/bench_memctrl.py``) prints it next to the measured cycles of the same traces.
The constants below describe the controller's pipeline (``mncore_hdl.memctrl``) and are
calibrated against it; everything else comes from the :class:`~mncore_hdl.arch.ArchConfig`.
"""

from __future__ import annotations

import math

from ..arch import ArchConfig

__all__ = ["REQUEST_TO_COMMAND", "REQUEST_TO_PREPARE", "READ_RETURN", "read_latency",
           "refresh_cost", "stream_cycles", "mixed_cycles", "turnaround_cycles"]

#: Cycles from a request handshake to its earliest column command (queue, then chunker).
REQUEST_TO_COMMAND = 2
#: Cycles from a request handshake to its earliest ACT/PRE: the queued request is already
#: visible to the scheduler's look-ahead, one cycle before it reaches the chunker.
REQUEST_TO_PREPARE = 1
#: Cycles from the CAS-latency data beat to the requester's ``rdata`` (the read FIFO).
READ_RETURN = 1
#: Cycles from the first request presented to its handshake, plus the controller's idle flag.
STREAM_EDGES = 3
#: Extra idle cycles around one refresh, beyond tRP + tRFC + tRCD (precharging the open
#: banks, the REF slot, re-opening the row).
REFRESH_SLACK = 4


def _check(config: ArchConfig) -> None:
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")


def read_latency(config: ArchConfig, kind: str = "hit") -> int:
    """Cycles from a read request's handshake to its first ``rdata`` beat, on an idle controller.

    ``kind`` is ``"hit"`` (row open), ``"miss"`` (bank closed) or ``"conflict"`` (another row
    open, tRAS already met): ``REQUEST_TO_COMMAND + CL + READ_RETURN`` for a hit; the row
    commands start at ``REQUEST_TO_PREPARE``, so a miss adds ``tRCD`` and a conflict
    ``tRP + tRCD`` from there.
    """
    _check(config)
    t = config.timing
    to_column = {"hit": REQUEST_TO_COMMAND,
                 "miss": max(REQUEST_TO_COMMAND, REQUEST_TO_PREPARE + t.trcd),
                 "conflict": max(REQUEST_TO_COMMAND, REQUEST_TO_PREPARE + t.trp + t.trcd)}
    if kind not in to_column:
        raise ValueError(f"Latency kind must be 'hit', 'miss' or 'conflict', not {kind!r}")
    return to_column[kind] + t.cl + READ_RETURN


def refresh_cost(config: ArchConfig, *, write: bool) -> int:
    """Data-bus cycles one refresh takes out of a stream (write streams also wait tWR)."""
    _check(config)
    t = config.timing
    return t.trp + t.trfc + t.trcd + REFRESH_SLACK + (t.twr if write else 0)


def _with_refresh(config: ArchConfig, base: float, write: bool) -> int:
    # Refresh steals ``cost`` cycles every tREFI cycles on average: T = base + T * cost / tREFI.
    cost = refresh_cost(config, write=write)
    return math.ceil(base / (1.0 - cost / config.timing.trefi))


def stream_cycles(config: ArchConfig, lw_count: int, *, write: bool,
                  sequential: bool = True) -> int:
    """Cycles for one port to move ``lw_count`` LWs as a stream of max-size (one-row) bursts.

    Measured from the first request presented, on an idle controller with all banks closed,
    to the last beat delivered (reads) or stored (writes), refresh included on average.
    Sequential streams hide row changes behind data (the controller opens the next row
    ahead); a non-sequential stream of random rows pays tRP + tRCD whenever the next row is in
    the bank being read, i.e. once in ``banks`` bursts on average.
    """
    _check(config)
    if isinstance(lw_count, bool) or not isinstance(lw_count, int) or lw_count < 0:
        raise ValueError(f"LW count must be a non-negative integer, not {lw_count!r}")
    if lw_count == 0:
        return 0
    t = config.timing
    start = STREAM_EDGES + REQUEST_TO_PREPARE + t.trcd
    if not write:
        start += t.cl + READ_RETURN
    base: float = start + lw_count
    if not sequential:
        bursts = math.ceil(lw_count / config.row_lw)
        base += (bursts - 1) * (t.trp + t.trcd) / config.banks
    return _with_refresh(config, base, write)


def turnaround_cycles(config: ArchConfig, read_lw: int, write_lw: int) -> int:
    """Idle bus cycles of alternating max-size read and write bursts: one tRTW per read burst
    followed by a write, one tWTR per write burst followed by a read."""
    t = config.timing
    reads = math.ceil(read_lw / config.row_lw)
    writes = math.ceil(write_lw / config.row_lw)
    pairs = min(reads, writes)
    # read, write, read, ...: a read-to-write change for each write, write-to-read for each
    # read after the first
    return pairs * t.trtw + max(0, min(reads - 1, writes)) * t.twtr


def mixed_cycles(config: ArchConfig, read_lw: int, write_lw: int) -> int:
    """Cycles for one requester alternating max-size read and write bursts (e.g. a copy).

    The read and write streams are assumed to use different banks at any time (as a copy
    between separately allocated buffers does), so the data beats, the pipeline fill,
    refresh and the bus turnarounds count: each change of direction between bursts costs
    tWTR (write to read) or tRTW (read to write) idle bus cycles.
    """
    _check(config)
    for name, v in (("Read", read_lw), ("Write", write_lw)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} LW count must be a non-negative integer, not {v!r}")
    if read_lw == 0:
        return stream_cycles(config, write_lw, write=True)
    if write_lw == 0:
        return stream_cycles(config, read_lw, write=False)
    t = config.timing
    start = STREAM_EDGES + REQUEST_TO_PREPARE + t.trcd + t.cl + READ_RETURN
    base = start + read_lw + write_lw + turnaround_cycles(config, read_lw, write_lw)
    cost = (refresh_cost(config, write=False) + refresh_cost(config, write=True)) / 2
    return math.ceil(base / (1.0 - cost / t.trefi))
