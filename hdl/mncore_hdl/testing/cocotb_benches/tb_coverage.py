"""Directed cocotb benches that reach what the other benches leave to chance (coverage gaps).

Run by ``sim/hdl/test_coverage.py``; never imported by pytest. Each is checked like every bench
(golden model, timing checker), and is meaningful with coverage off too.
"""

from __future__ import annotations

import dataclasses

import cocotb

from mncore_hdl.contracts.converter import (
    GATHER_QUANTITIES,
    MAX_LOOPS,
    OUTER_QUANTITIES,
    READ_QUANTITIES,
    REG_ADDR_BITS,
)
from mncore_hdl.converter import compile_program
from mncore_hdl.converter.program import ConverterProgram, TableLoop
from mncore_hdl.layout import conversion, host_layout, native_layout

from . import memctrl_agents
from .converter_agents import TB as ConverterTB
from .converter_agents import random_pair, random_tensor

_CARRIES = {"outer": len(OUTER_QUANTITIES), "read": len(READ_QUANTITIES),
            "gather": len(GATHER_QUANTITIES)}


@cocotb.test()
async def memctrl_window_and_refresh(dut):
    """Requests wholly past the window (both directions), and short random-row traffic across
    several refresh periods, so that refresh falls due after each command kind."""
    tb = memctrl_agents.TB(dut)
    await tb.reset()
    cfg = tb.config
    win = cfg.sim_window_lw
    port = tb.ports[0]
    port.submit(win + 64, 8, True)    # every beat dropped
    port.submit(win + 64, 8, False)   # every beat an error beat
    port.submit(win - 4, 8, True)     # straddling: 4 beats land, 4 are dropped
    port.submit(win - 4, 8, False)
    await tb.run_until_done()
    if not int(dut.error.value):
        tb.error("error flag not raised by a request past the window")
    dut.error_clear.value = 1
    await tb.step()
    dut.error_clear.value = 0
    # Long sequential streams span refreshes with the bus busy with column commands, so
    # refresh falls due after a WR, then after a RD (row hits: few ACT/PRE between them).
    for write in (True, False):
        for p in tb.ports:
            for k in range(8):
                p.submit(p.i * 4096 + k * 256, 256, write)
        await tb.run_until_done()
    # Short random-row traffic: hits, misses and conflicts on every bank, and refresh falling
    # due after an ACT or a PRE.
    bl = cfg.timing.burst_length
    start = tb.cycle
    while tb.cycle - start < 3 * cfg.timing.trefi:
        for p in tb.ports:
            for _ in range(8):
                p.submit(tb.rng.randrange(0, win - bl, bl), bl, tb.rng.random() < 0.5)
        await tb.run_until_done()
        await tb.idle_cycles(tb.rng.randrange(40))  # shift traffic against the refresh phase
    tb.finish()


def pad_table(prog: ConverterProgram, table: str, depth: int) -> ConverterProgram:
    """``prog`` with loop table ``table`` grown to ``depth`` loops by outermost extent-1 loops:
    the same walk (an extent-1 loop never steps, so its carries are never added)."""
    loops = getattr(prog, table)
    extra = (TableLoop(1, (0,) * _CARRIES[table]),) * (depth - len(loops))
    return dataclasses.replace(prog, **{table: loops + extra})


@cocotb.test()
async def converter_loop_depths(dut):
    """Every register read back once; every depth 0..MAX_LOOPS of each loop table, and both
    element widths, checked against the golden model: a small conversion padded with
    extent-1 loops, plus random pairs whose gather table is 0 or 1 deep (padding only adds
    loops)."""
    tb = ConverterTB(dut)
    await tb.reset()
    for addr in range(1 << REG_ADDR_BITS):  # every arm of the register read-back multiplexer
        await tb.read_reg(addr)
    shape = (8, 8)
    for dtype in ("float16", "float32"):
        a, b = host_layout(shape, dtype), native_layout(shape, dtype, tb.config)
        desc = conversion(a, b)
        prog = compile_program(desc, tb.config)
        for table in _CARRIES:
            for depth in range(len(getattr(prog, table)), MAX_LOOPS + 1):
                await tb.convert(a, b, desc, random_tensor(tb.rng, shape, dtype),
                                 label=f"{dtype} {table} depth {depth}",
                                 prog=pad_table(prog, table, depth))
    wanted = {0, 1}
    for _ in range(400):  # seeded search: a few milliseconds per candidate
        if not wanted:
            break
        a, b, desc = random_pair(tb.rng, max_numel=256, max_lw=256)
        depth = len(compile_program(desc, tb.config).gather)
        if depth in wanted:
            wanted.discard(depth)
            await tb.convert(a, b, desc, random_tensor(tb.rng, a.shape, a.dtype),
                             label=f"gather depth {depth}")
    if wanted:
        tb.error(f"no random pair with a gather table {sorted(wanted)} deep in 400 tries")
    assert tb.errors == 0, f"{tb.errors} mismatches"


@cocotb.test()
async def timing_counter(dut):
    """A memory controller timing counter (the smallest block): trigger, count down, ready."""
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, RisingEdge

    Clock(dut.clk, 10, unit="ns", impl="gpi").start()
    dut.rst.value, dut.trigger.value = 1, 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    for _ in range(3):
        dut.trigger.value = 1
        await RisingEdge(dut.clk)
        dut.trigger.value = 0
        waited = 0
        while True:
            await RisingEdge(dut.clk)
            waited += 1
            if int(dut.ready.value):
                break
        # 4 edges of count-down after the trigger's edge; one more if this sample after an
        # edge sees the register before its update (the simulator's region order)
        assert waited in (4, 5), f"ready {waited} cycles after the trigger, expected 4 or 5"
