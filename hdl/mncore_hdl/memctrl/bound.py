"""The best data-bus efficiency any scheduler could reach for a traffic pattern (pure Python).

A scheduler is judged against this bound, not against 100%: a random short-burst stream that
reaches 60% of the bus may be at its limit, or far from it, depending on the timing rules.
Every term is a rate the DRAM's rules impose whatever the order of commands (a scheduler that
reorders without limit meets none of them more cheaply); the bound is the tightest of them,
less the time refresh takes. Derivation (``docs/memory_controller.md``, "The bound"):

- **data bus**: at most one beat a cycle; a chunk of ``L < tCCD`` beats still holds the column
  slot for tCCD, so at most ``min(1, L / tCCD)``;
- **command slot**: one DRAM command a cycle. A chunk that misses its row needs PRE, ACT and
  its column command, so at most ``L / 3`` beats a cycle (``L`` when it hits);
- **activate rate** (row misses only): one ACT per chunk, at most one per tRRD, four per
  tFAW, and one per bank per bank cycle ``tRC' = tRP + max(tRAS, tRCD + busy)``, where
  ``busy`` is how long the column keeps the bank from precharging: ``max(L + 1, tRTP)`` for
  a read, ``L + tWR`` for a write. Over ``B`` banks: ``L * min(1/tRRD, 4/tFAW, B/tRC')``;
- **turnarounds**: a scheduler that groups reads and writes pays ``tWTR + tRTW`` bus cycles
  once per pair of groups. ``Traffic.direction_run`` is the longest run of one direction the
  traffic allows (None: unlimited, the cost vanishes);
- **refresh**: every tREFI the bus is dead for at least ``tRP + tRFC + tRCD + 1`` cycles (the
  last burst's PRE, tRP, REF, tRFC, ACT, tRCD, then the first beat); ``tWR`` more when every
  access writes.

:func:`bound_cycles` turns the rate into the fewest cycles for a finite run (whole refreshes
only, counted from a refresh timer at zero, as the benches start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..arch import ArchConfig

__all__ = ["Traffic", "peak_rate", "refresh_dead_cycles", "efficiency_bound", "bound_cycles"]

PATTERNS = ("sequential", "random")


@dataclass(frozen=True)
class Traffic:
    """A traffic pattern, as far as the timing bound needs it.

    Parameters
    ----------
    pattern : str
        ``"sequential"`` (streams walking whole rows: row changes are rare, ``1 / row_lw``
        of the beats) or ``"random"`` (every chunk opens a row: random addresses over many
        rows).
    burst : int
        Beats per chunk (one column command), at most the burst length.
    read_share : float
        Fraction of the chunks that read, in [0, 1].
    banks : int or None
        Banks the traffic spreads over (None: all of the config's).
    direction_run : int or None
        The most chunks of one direction a scheduler can serve in a row (None: unlimited).
    """

    pattern: str = "random"
    burst: int = 8
    read_share: float = 1.0
    banks: int | None = None
    direction_run: int | None = None

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"Traffic pattern must be one of {', '.join(PATTERNS)}, "
                             f"not {self.pattern!r}")
        for name in ("burst", "banks", "direction_run"):
            v = getattr(self, name)
            if v is None and name != "burst":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"Traffic.{name} must be a positive integer, not {v!r}")
        if not 0.0 <= self.read_share <= 1.0:
            raise ValueError(f"Traffic.read_share must be in [0, 1], not {self.read_share!r}")


def _check(config: ArchConfig, traffic: Traffic) -> None:
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if not isinstance(traffic, Traffic):
        raise TypeError(f"Traffic must be a Traffic, not {traffic!r}")
    if traffic.burst > config.timing.burst_length:
        raise ValueError(f"Traffic.burst must be at most the burst length "
                         f"({config.timing.burst_length}), not {traffic.burst}")


def _activate_rate(config: ArchConfig, traffic: Traffic) -> float:
    """Chunks a cycle the activate rules allow when every chunk opens a row."""
    t = config.timing
    length = traffic.burst
    s = traffic.read_share
    busy = s * max(length + 1, t.trtp) + (1 - s) * (length + t.twr)
    trc = t.trp + max(t.tras, t.trcd + busy)
    banks = traffic.banks or config.banks
    return min(1 / t.trrd, 4 / t.tfaw, banks / trc)


def peak_rate(config: ArchConfig, traffic: Traffic) -> float:
    """Beats a cycle between refreshes: the tightest of the rules in the module docstring."""
    _check(config, traffic)
    t = config.timing
    length = traffic.burst
    miss = 1.0 if traffic.pattern == "random" else length / config.row_lw
    cycles_per_chunk = max(
        max(length, t.tccd),                 # data bus and tCCD
        1 + 2 * miss,                        # command slot: column, plus PRE and ACT
        miss / _activate_rate(config, traffic),
    )
    s = traffic.read_share
    if traffic.direction_run is not None and 0 < s < 1:
        # one pair of turnarounds per run of the minority direction and its share of the rest
        minority = min(s, 1 - s)
        pairs_per_chunk = minority / traffic.direction_run
        cycles_per_chunk += pairs_per_chunk * (t.twtr + t.trtw)
    return length / cycles_per_chunk


def refresh_dead_cycles(config: ArchConfig, traffic: Traffic) -> int:
    """Bus cycles each refresh takes at the least (see the module docstring)."""
    _check(config, traffic)
    t = config.timing
    tail = t.twr if traffic.read_share == 0 else max(1, t.trtp - traffic.burst)
    return tail + t.trp + t.trfc + t.trcd


def efficiency_bound(config: ArchConfig, traffic: Traffic) -> float:
    """The best long-run data-bus efficiency (beats / cycles, at most 1) for ``traffic``."""
    dead = refresh_dead_cycles(config, traffic)
    return peak_rate(config, traffic) * (1 - dead / config.timing.trefi)


def bound_cycles(config: ArchConfig, traffic: Traffic, beats: int) -> int:
    """The fewest cycles any scheduler needs to move ``beats`` beats of ``traffic``.

    Refreshes are whole: a run of ``T`` cycles from a refresh timer at zero holds
    ``floor(T / tREFI)`` of them, each dead for :func:`refresh_dead_cycles`. The run also
    pays its start (ACT, tRCD, first beat) and, reading only, the CAS latency of its last beat.
    """
    if isinstance(beats, bool) or not isinstance(beats, int) or beats < 0:
        raise ValueError(f"Beat count must be a non-negative integer, not {beats!r}")
    if beats == 0:
        return 0
    t = config.timing
    # the first ACT to the first beat, and for a read-only run the CAS latency of the last
    fill = t.trcd + 1 + (t.cl - 1 if traffic.read_share == 1 else 0)
    busy = fill + math.ceil(beats / peak_rate(config, traffic))
    dead = refresh_dead_cycles(config, traffic)
    trefi = t.trefi
    total = busy
    while True:  # T = busy + floor(T / tREFI) * dead converges in a few steps (dead < tREFI)
        nxt = busy + (total // trefi) * dead
        if nxt == total:
            return total
        total = nxt
