"""The starvation bounds in cycles under long random traffic (Amaranth's simulator).

The fr_fcfs chunk bound is composed of proofs, one of them (the controller's gap) a BMC run
covering gaps that start in its first cycles only; here the whole controller at
``STARVATION_CONFIG`` (fr_fcfs, window 4, cap 1, 2 ports; and in order) runs thousands of
cycles of protocol-legal random traffic per seed, and every gap and wait it shows is held to
its bound. ``mncore_hdl.testing.starvation`` drives and measures (``bench/bench_starvation.py``
prints longer sweeps with the worst traces); this file runs a short share of it.
"""

from __future__ import annotations

import pytest
from mncore_hdl.formal.starvation import (
    chunk_bound_cycles,
    gap_cycles,
    refresh_cycles,
    starvation_bound_cycles,
)
from mncore_hdl.testing import starvation as bench

#: Cycles per fr_fcfs seed: about 7 s each in Amaranth's simulator (loaded machine).
FR_CYCLES = 4000


@pytest.mark.parametrize("profile", sorted(bench.PROFILES))
def test_fr_fcfs_gap_and_chunk_wait_within_their_bounds(profile):
    seed = 20261202 + sorted(bench.PROFILES).index(profile)
    r = bench.simulate(bench.FR_FCFS, bench.PORTS, seed, FR_CYCLES, bench.PROFILES[profile])
    assert bench.violations(r) == [], f"seed={seed}\n" + bench.format_trace(r.gap)
    assert r.gap.cycles <= gap_cycles(bench.FR_FCFS) == 15
    assert r.worst_chunk.cycles <= chunk_bound_cycles(bench.FR_FCFS, bench.PORTS) == 63
    # the monitor sees real gaps and waits: a refresh alone stops every port that long
    assert r.gap.cycles >= refresh_cycles(bench.FR_FCFS), f"seed={seed}: {r.gap}"
    # with two ports busy a chunk also waits for the other port's issues (the directed
    # profile drives one port: there its wait is its gap)
    assert r.worst_chunk.cycles >= r.gap.cycles + (profile != "directed"), f"seed={seed}"
    assert r.issues > FR_CYCLES // 10 and r.refreshes >= FR_CYCLES // 16 - 1, f"seed={seed}"
    if profile == "directed":
        # the suspected case is reached: a younger chunk's row opened, then an older chunk
        # shown instead and its row opened again, inside one gap (a refresh too, measured: 9)
        assert r.switched_gap.cycles >= refresh_cycles(bench.FR_FCFS), f"seed={seed}"


@pytest.mark.parametrize("profile", ["random", "withhold"])
def test_in_order_head_wait_within_the_starvation_bound(profile):
    seed = 20261203
    r = bench.simulate(bench.IN_ORDER, bench.PORTS, seed, 3000, bench.PROFILES[profile])
    assert bench.violations(r) == [], f"seed={seed}"
    bound = starvation_bound_cycles(bench.IN_ORDER, bench.PORTS)
    assert refresh_cycles(bench.IN_ORDER) <= r.worst_head.cycles <= bound == 30, f"seed={seed}"


def test_violations_name_each_figure_over_its_bound():
    # The checker itself: a result with each figure one past its bound is reported.
    r = bench.simulate(bench.FR_FCFS, bench.PORTS, 1, 50, bench.PROFILES["random"])
    r.gap = bench.Worst(gap_cycles(bench.FR_FCFS) + 1)
    r.chunk_wait = [bench.Worst(chunk_bound_cycles(bench.FR_FCFS, bench.PORTS) + 1)]
    r.lost_legality = [(7, 0)]
    found = bench.violations(r)
    assert [line.split(": ")[1].split()[0] for line in found] == ["gap", "chunk", "eligible"]
