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
           "refresh_cost", "stream_cycles", "mixed_cycles", "turnaround_cycles",
           "random_cycles", "random_chunk_gap"]

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
#: Cycles a row-missing chunk spends in the queue besides tRP + tRCD and REQUEST_TO_PREPARE:
#: the PRE and ACT command slots and the hand-off from the queue to the chunker (calibrated).
MISS_OVERHEAD = 3.5
#: Cycles of a same-bank successor's wait that ``fr_fcfs`` overlaps: it precharges in the
#: first cycle the bank allows, ahead of the chunk's turn at the arbiter (calibrated).
PREPARED_OVERLAP = 4
#: How the chunks queued behind a stalled one hide its wait under ``fr_fcfs``: the wait is
#: divided by ``(queued * ports) ** HIDE_EXPONENT``, every queued chunk of every port
#: being a candidate to go first (calibrated).
HIDE_EXPONENT = 1.0
#: Direction changes ``fr_fcfs`` merges per port: it prefers queued chunks of the last
#: column command's direction, in the port's window and across ports (calibrated).
GROUPING = 8


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


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    return value


def _same_bank_stall(banks: int, bank_cycle: float, gap: float) -> float:
    """Expected wait of a chunk whose bank one of the chunks before it still holds.

    The chunk ``m`` places ahead used the same bank with probability ``(1/B)(1 - 1/B)^(m-1)``
    (the most recent such chunk), and its column command was ``m * gap`` cycles ago; the bank
    takes ``bank_cycle`` cycles from that column command to the next one on another row.
    """
    stall = 0.0
    p_first = 1.0 / banks
    m = 1
    while m * gap < bank_cycle:
        stall += p_first * (1.0 - p_first) ** (m - 1) * (bank_cycle - m * gap)
        m += 1
    return stall


def random_chunk_gap(config: ArchConfig, *, burst: int, ports: int, read_share: float,
                     direction_changes: float, banks: int) -> float:
    """Mean cycles between column commands of random row-missing chunks (refresh aside).

    The terms, each a rule of the controller or the DRAM:

    - **bus and activates**: a chunk holds the column slot ``max(L, tCCD)`` cycles and each
      opens a row, at most one ACT per ``max(tRRD, tFAW / 4)``;
    - **queue**: a chunk is prepared (PRE, tRP, ACT, tRCD) only once it is queued, taking
      ``lat = REQUEST_TO_PREPARE + tRP + tRCD + MISS_OVERHEAD``; with ``n`` chunks queued per
      port (``in_order``: the queue entry and the chunker, 2; ``fr_fcfs``: the port's
      window, plus the chunker) at most ``n * ports`` chunks a ``lat`` (Little's law);
    - **same bank**: a chunk whose bank a chunk ahead holds waits for that bank's cycle from
      its column command, ``tRP + tRCD + max(tRAS - tRCD, busy)`` (``busy`` as in
      ``memctrl.bound``) in order, ``PREPARED_OVERLAP`` less with ``fr_fcfs``; the expected
      wait is :func:`_same_bank_stall`. In order it stalls every port; ``fr_fcfs`` serves
      the other queued chunks of every port meanwhile (divided by
      ``(queued * ports) ** HIDE_EXPONENT``);
    - **turnarounds**: each change of direction costs ``tWTR + tRTW``; ``fr_fcfs`` groups
      directions in each port's window and across ports, so a change is paid once per
      ``GROUPING * ports`` of them.

    The gap is the fixed point of these terms (the stall depends on the gap itself).
    """
    t = config.timing
    s = read_share
    fr = config.scheduler == "fr_fcfs"
    free = max(burst, t.tccd, t.trrd, t.tfaw / 4)
    latency = REQUEST_TO_PREPARE + t.trp + t.trcd + MISS_OVERHEAD
    queued = config.scheduler_window + 1 if fr else 2
    busy = s * max(burst + 1, t.trtp) + (1 - s) * (burst + t.twr)
    if fr:
        bank_cycle = t.trp + t.trcd + busy - PREPARED_OVERLAP
    else:
        bank_cycle = t.trp + t.trcd + max(t.tras - t.trcd, busy)
    turn = direction_changes * (t.twtr + t.trtw) / (ports * GROUPING if fr else 1)
    gap = free
    for _ in range(200):  # a damped iteration: the stall falls as the gap grows
        stall = _same_bank_stall(banks, bank_cycle, gap)
        if fr:
            hidden = stall / (queued * ports) ** HIDE_EXPONENT
            new = max(free, latency / (queued * ports)) + turn + hidden
        else:
            new = max(free + turn + stall, latency / (queued * ports))
        if abs(new - gap) < 1e-6:
            break
        gap = (gap + new) / 2
    return gap


def random_cycles(config: ArchConfig, lw_count: int, *, burst: int | None = None,
                  ports: int = 1, read_share: float = 1.0,
                  direction_changes: float | None = None, banks: int | None = None) -> int:
    """Cycles for ``ports`` ports moving ``lw_count`` LWs in all as random short bursts.

    Every burst of ``burst`` beats (default: the DRAM burst length) goes to a random row, so
    each opens a row (a window of many rows per bank: hits are rare); the ports share one
    data bus. ``read_share`` of the bursts read; ``direction_changes`` is the share of bursts
    whose direction differs from the one before (default ``2 s (1 - s)``, independent random
    directions; two reads then a write: 2/3). ``banks`` the traffic spreads over (default
    all). The scheduler is the config's (``in_order`` or ``fr_fcfs`` with its window).

    Measured like :func:`stream_cycles`: from the first request on an idle controller to the
    last beat, refresh included on average. The gap between bursts is
    :func:`random_chunk_gap`.
    """
    _check(config)
    _count("LW count", lw_count)
    t = config.timing
    burst = t.burst_length if burst is None else burst
    if isinstance(burst, bool) or not isinstance(burst, int) or not 0 < burst <= t.burst_length:
        raise ValueError(f"Burst must be an integer in 1..{t.burst_length}, not {burst!r}")
    if isinstance(ports, bool) or not isinstance(ports, int) or ports <= 0:
        raise ValueError(f"Port count must be a positive integer, not {ports!r}")
    if not 0.0 <= read_share <= 1.0:
        raise ValueError(f"Read share must be in [0, 1], not {read_share!r}")
    if direction_changes is None:
        direction_changes = 2 * read_share * (1 - read_share)
    if not 0.0 <= direction_changes <= 1.0:
        raise ValueError(f"Direction changes must be in [0, 1], not {direction_changes!r}")
    banks = config.banks if banks is None else banks
    if isinstance(banks, bool) or not isinstance(banks, int) or not 0 < banks <= config.banks:
        raise ValueError(f"Banks must be an integer in 1..{config.banks}, not {banks!r}")
    if lw_count == 0:
        return 0
    gap = random_chunk_gap(config, burst=burst, ports=ports, read_share=read_share,
                           direction_changes=direction_changes, banks=banks)
    start = STREAM_EDGES + REQUEST_TO_PREPARE + t.trcd + (t.cl + READ_RETURN if read_share else 0)
    base = start + math.ceil(lw_count / burst) * gap
    cost = (read_share * refresh_cost(config, write=False)
            + (1 - read_share) * refresh_cost(config, write=True))
    return math.ceil(base / (1.0 - cost / t.trefi))
