"""The efficiency bound (mncore_hdl.memctrl.bound): each term, published anchors, validation."""

import pytest
from mncore_hdl.arch import MNCORE2_SIM, TIMING_PRESETS, DramTiming
from mncore_hdl.memctrl.bound import (
    Traffic,
    bound_cycles,
    efficiency_bound,
    peak_rate,
    refresh_dead_cycles,
)
from mncore_hdl.testing.hdl_checks import imports_without_amaranth

CFG = MNCORE2_SIM
DDR4_BUS = CFG.replace(timing=TIMING_PRESETS["ddr4_3200_bus"])


def test_imports_without_amaranth():
    imports_without_amaranth("mncore_hdl.memctrl.bound")


def test_sequential_is_refresh_bound():
    t = CFG.timing
    seq = Traffic("sequential", 8, 1.0)
    assert peak_rate(CFG, seq) == 1.0
    assert refresh_dead_cycles(CFG, seq) == 1 + t.trp + t.trfc + t.trcd
    assert efficiency_bound(CFG, seq) == pytest.approx(1 - 115 / t.trefi)
    # writing only, the last burst's tWR comes before the precharge instead
    assert refresh_dead_cycles(CFG, Traffic("sequential", 8, 0.0)) == (
        t.twr + t.trp + t.trfc + t.trcd)


def test_activate_window_bounds_random_ddr4_bursts():
    # 4 ACTs per tFAW = 68 cycles, 8 beats each: 32 / 68 = 47.1% of the bus before refresh,
    # the figure LiteDRAM measures (47.6% with the unrounded 67.2 cycles); about 45% after
    # refresh, as the issue quotes for a DDR4-3200 rank
    rnd = Traffic("random", 8, 1.0)
    assert peak_rate(DDR4_BUS, rnd) == pytest.approx(32 / 68)
    assert 0.44 < efficiency_bound(DDR4_BUS, rnd) < 0.46


def test_each_rule_can_bind():
    rnd = Traffic("random", 8, 1.0)
    # tRRD
    cfg = CFG.replace(timing=DramTiming(trrd=16, tfaw=16))
    assert peak_rate(cfg, rnd) == pytest.approx(8 / 16)
    # bank cycle over few banks: tRP + max(tRAS, tRCD + max(L + 1, tRTP)) = 12 + 28 = 40
    assert peak_rate(CFG, Traffic("random", 8, 1.0, banks=2)) == pytest.approx(8 / 20)
    # command slot: PRE, ACT and RD for one beat
    basic = CFG.replace(timing=TIMING_PRESETS["basic"])
    assert peak_rate(basic, Traffic("random", 1)) == (
        pytest.approx(1 / 3))
    # tCCD for short chunks that hit their row
    assert peak_rate(CFG, Traffic("sequential", 1)) == pytest.approx(1 / CFG.timing.tccd)
    # turnarounds: a pair per run of 4 minority chunks, tWTR + tRTW = 3 cycles
    mixed = Traffic("sequential", 8, 0.5, direction_run=4)
    assert peak_rate(CFG, mixed) == pytest.approx(8 / (8 + 0.5 / 4 * 3))
    assert peak_rate(CFG, Traffic("sequential", 8, 0.5)) == 1.0


def test_bound_cycles_counts_whole_refreshes():
    seq = Traffic("sequential", 8, 1.0)
    t = CFG.timing
    fill = t.trcd + t.cl
    assert bound_cycles(CFG, seq, 0) == 0
    assert bound_cycles(CFG, seq, 1000) == fill + 1000
    n = 3 * t.trefi
    got = bound_cycles(CFG, seq, n)
    assert got == fill + n + (got // t.trefi) * refresh_dead_cycles(CFG, seq)
    assert n / got >= efficiency_bound(CFG, seq) - 0.01


@pytest.mark.parametrize("kwargs, message", [
    ({"pattern": "strided"}, "Traffic pattern must be one of sequential, random, not 'strided'"),
    ({"burst": 0}, "Traffic.burst must be a positive integer, not 0"),
    ({"banks": 0}, "Traffic.banks must be a positive integer, not 0"),
    ({"read_share": 1.5}, r"Traffic.read_share must be in \[0, 1\], not 1.5"),
])
def test_traffic_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Traffic(**kwargs)


def test_bound_validation():
    with pytest.raises(TypeError, match="Config must be an ArchConfig, not 1"):
        peak_rate(1, Traffic())
    with pytest.raises(TypeError, match="Traffic must be a Traffic, not 'random'"):
        peak_rate(CFG, "random")
    with pytest.raises(ValueError, match=r"Traffic.burst must be at most the burst length \(8\)"):
        peak_rate(CFG, Traffic(burst=16))
    with pytest.raises(ValueError, match="Beat count must be a non-negative integer, not -1"):
        bound_cycles(CFG, Traffic(), -1)
