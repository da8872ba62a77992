"""The bench's hardware traffic generator on a tiny controller (Amaranth simulator)."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.contracts.memctrl import register_map
from mncore_hdl.memctrl import timing
from mncore_hdl.memctrl.trafficgen import RW, BenchTop, Mode, TrafficGen

TINY = MNCORE2_SIM.replace(
    banks=4, row_lw=32, sim_window_lw=1024,
    timing=DramTiming(cl=4, trcd=3, trp=3, tras=8, twr=3, trefi=300, trfc=20, burst_length=8))


@pytest.mark.parametrize("mode,rw", [(Mode.READ, RW.COIN), (Mode.WRITE, RW.COIN),
                                     (Mode.MIXED, RW.COIN), (Mode.RANDOM, RW.COIN),
                                     (Mode.RANDOM, RW.READ), (Mode.RANDOM, RW.TWO_ONE)])
def test_stream_finishes_with_every_beat(mode, rw):
    dut = BenchTop(TINY, 2)
    got = {}

    async def bench(ctx):
        settings = {"mode": mode, "rw": rw, "base": 0, "base2": 512, "count": 32, "blen": 32}
        for name, value in settings.items():
            ctx.set(getattr(dut, f"gen0_{name}"), value)
        ctx.set(dut.gen1_count, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(dut.done)
        got["cycles"] = ctx.get(dut.cycles)
        regs = register_map(2)
        for name in ("port0.read_beats", "port0.write_beats"):
            ctx.set(dut.csr_addr, regs[name])
            await ctx.tick()
            await ctx.tick()
            got[name] = ctx.get(dut.csr_rdata)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got["port0.read_beats"] + got["port0.write_beats"] == 32 * 32
    if mode == Mode.READ:
        assert got["port0.write_beats"] == 0
        # a stream of 1024 LW (a few refreshes) within 10% of the analytic model
        model = timing.stream_cycles(TINY, 1024, write=False)
        assert abs(got["cycles"] - model) <= 0.1 * model, (got["cycles"], model)
    if mode == Mode.MIXED:
        assert got["port0.read_beats"] == got["port0.write_beats"] == 16 * 32
    if mode == Mode.RANDOM and rw == RW.READ:
        assert got["port0.write_beats"] == 0
    if mode == Mode.RANDOM and rw == RW.TWO_ONE:
        # two reads, then a write: 32 bursts hold 10 writes (after bursts 2, 5, ..., 29)
        assert got["port0.write_beats"] == 10 * 32


def test_trafficgen_validation():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError) as info:
            TrafficGen(TINY, seed=0)
        text = str(info.value)
        del info
        with pytest.raises(TypeError) as info:
            TrafficGen("x")
        text2 = str(info.value)
        del info
        gc.collect()
    assert text == "LFSR seed must be a non-zero 32-bit integer, not 0"
    assert text2 == "Config must be an ArchConfig, not 'x'"
