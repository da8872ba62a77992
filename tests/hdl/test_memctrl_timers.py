"""Unit tests of the memory controller's timing counters and refresher (Amaranth simulator)."""


import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.memctrl.rank import RankTiming
from mncore_hdl.memctrl.refresher import Refresher
from mncore_hdl.memctrl.timers import SharedTimer, TimingCounter
from mncore_hdl.testing.hdl_checks import expect_error


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("cycles", [1, 2, 5, 12])
def test_ready_exactly_cycles_after_trigger(cycles):
    dut = TimingCounter(cycles, "trcd")
    seen = []

    async def bench(ctx):
        assert ctx.get(dut.ready) == 1
        ctx.set(dut.trigger, 1)
        await ctx.tick()
        ctx.set(dut.trigger, 0)
        for _ in range(cycles + 3):
            seen.append(ctx.get(dut.ready))
            await ctx.tick()

    _run(dut, bench)
    # trigger in cycle 0; not ready in cycles 1 .. cycles-1, ready from cycle `cycles` on
    assert seen == [0] * (cycles - 1) + [1] * 4


def test_retrigger_restarts_the_count():
    dut = TimingCounter(4, "twr")
    seen = []

    async def bench(ctx):
        for k in range(8):
            ctx.set(dut.trigger, k in (0, 2))
            await ctx.tick()
            seen.append(ctx.get(dut.ready))

    _run(dut, bench)
    assert seen == [0, 0, 0, 0, 0, 1, 1, 1]


def test_counter_validation():
    expect_error(TypeError, "Cycle count must be an integer, not 'x'", TimingCounter, "x")
    expect_error(ValueError, "Cycle count must be a positive integer, not -3", TimingCounter, -3)
    expect_error(TypeError, "Rule name must be a string, not 3", TimingCounter, 3, 3)


def _shared_against_counters(rules, overlap, cycles=400):
    """Drive a :class:`SharedTimer` and one :class:`TimingCounter` per rule with the same
    random triggers; return (shared ready, reference ready) per cycle. The reference is the
    AND of the counters (``overlap``) or the counter of the rule triggered last (not)."""
    m = Module()
    m.submodules.shared = shared = SharedTimer(rules, "wait", overlap=overlap)
    counters = {}
    for rule, n in rules.items():
        m.submodules[rule] = counters[rule] = TimingCounter(n, rule)
    rng = random.Random(7)
    seen = []

    async def bench(ctx):
        last = None
        for _ in range(cycles):
            fired = [r for r in rules if rng.random() < 0.15]
            if not overlap:
                fired = fired[:1]
            for rule in rules:
                ctx.set(getattr(shared, rule), rule in fired)
                ctx.set(counters[rule].trigger, rule in fired)
            if overlap:
                want = all(ctx.get(c.ready) for c in counters.values())
            else:
                want = last is None or ctx.get(counters[last].ready)
            seen.append((ctx.get(shared.ready), int(want)))
            last = fired[0] if fired else last
            await ctx.tick()

    _run(m, bench)
    return seen


@pytest.mark.parametrize("rules", [{"tras": 7, "twr": 5, "trtp": 2},
                                   {"tras": 1, "twr": 4, "trtp": 1}])
def test_shared_timer_is_the_and_of_its_rules(rules):
    seen = _shared_against_counters(rules, overlap=True)
    assert [s for s, _ in seen] == [w for _, w in seen]
    assert 0 in [s for s, _ in seen]       # the rules did hold commands off


@pytest.mark.parametrize("rules", [{"trcd": 5, "trp": 3}, {"trcd": 4, "trp": 1}])
def test_shared_timer_without_overlap_follows_the_last_trigger(rules):
    seen = _shared_against_counters(rules, overlap=False)
    assert [s for s, _ in seen] == [w for _, w in seen]
    assert 0 in [s for s, _ in seen]


def test_shared_timer_validation():
    expect_error(ValueError, "A shared timer needs at least one rule, not none", SharedTimer,
                 {}, "x")
    expect_error(ValueError, "Cycle count must be a positive integer, not 0", SharedTimer,
                 {"trcd": 0}, "x")


def test_refresher_interval_and_trfc():
    cfg = MNCORE2_SIM.replace(timing=DramTiming(trefi=40, trfc=6))
    dut = Refresher(cfg)
    wants = []
    rfc = []

    async def bench(ctx):
        for cyc in range(130):
            want = ctx.get(dut.want)
            wants.append(want)
            ctx.set(dut.issue, want and cyc % 40 == 5)  # serve each request 5 cycles late
            rfc.append(ctx.get(dut.trfc_ready))
            await ctx.tick()

    _run(dut, bench)
    rises = [i for i in range(1, len(wants)) if wants[i] and not wants[i - 1]]
    assert rises == [40, 80, 120]                      # every tREFI, not shifted by the delay
    assert rfc[46:51] == [0] * 5 and rfc[51] == 1      # tRFC after the REF in cycle 45


def test_refresher_validation():
    expect_error(TypeError, "Config must be an ArchConfig, not 1", Refresher, 1)


RANK = MNCORE2_SIM.replace(timing=DramTiming(trrd=3, tfaw=16, twtr=2, trtw=1, tccd=2))


def _rank_trace(config, script, cycles):
    """Drive :class:`RankTiming` with ``script[cycle] = {input: value}``; sample the readies."""
    dut = RankTiming(config)
    seen = []

    async def bench(ctx):
        for cyc in range(cycles):
            for name in ("act", "col", "col_write", "rbeat", "wbeat"):
                ctx.set(getattr(dut, name), script.get(cyc, {}).get(name, 0))
            seen.append((ctx.get(dut.act_ready), ctx.get(dut.rd_ready), ctx.get(dut.wr_ready)))
            await ctx.tick()

    _run(dut, bench)
    return seen


def test_rank_trrd_and_four_activate_window():
    # ACTs as early as tRRD allows: cycles 0, 3, 6, 9; the fifth waits for tFAW after the first
    script = {c: {"act": 1} for c in (0, 3, 6, 9)}
    act = [a for a, _, _ in _rank_trace(RANK, script, 20)]
    assert act[:4] == [1, 0, 0, 1]                  # tRRD = 3 after the ACT of cycle 0
    assert act[12:17] == [0, 0, 0, 0, 1]            # tRRD met at 12, tFAW (0 + 16) at 16
    assert act[17:] == [1, 1, 1]


def test_rank_turnarounds_and_tccd():
    # WR in cycle 0 with beats 1..4; then RD ready tWTR = 2 after the last beat (cycle 6)
    script = {0: {"col": 1, "col_write": 1}}
    script.update({c: {"wbeat": 1} for c in range(1, 5)})
    seen = _rank_trace(RANK, script, 9)
    rd = [r for _, r, _ in seen]
    wr = [w for _, _, w in seen]
    assert rd == [1, 0, 0, 0, 0, 0, 1, 1, 1]
    assert wr == [1, 0, 1, 1, 1, 1, 1, 1, 1]        # same direction: only tCCD = 2
    # RD in cycle 0 with one beat in cycle 1: a WR needs tRTW = 1 idle cycle, so cycle 2
    seen = _rank_trace(RANK, {0: {"col": 1}, 1: {"rbeat": 1}}, 4)
    assert [w for _, _, w in seen] == [1, 0, 1, 1]
    assert [r for _, r, _ in seen] == [1, 0, 1, 1]


def test_rank_zero_turnaround_is_no_rule():
    cfg = MNCORE2_SIM.replace(timing=DramTiming(twtr=0, trtw=0, tccd=1))
    seen = _rank_trace(cfg, {0: {"col": 1, "col_write": 1}, 1: {"wbeat": 1}}, 3)
    assert [r for _, r, _ in seen] == [1, 1, 1]


def test_rank_validation():
    expect_error(TypeError, "Config must be an ArchConfig, not 1", RankTiming, 1)
