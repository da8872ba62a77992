"""Unit tests of the memory controller's timing counters and refresher (Amaranth simulator)."""


import pytest
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.memctrl.refresher import Refresher
from mncore_hdl.memctrl.timers import TimingCounter
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
