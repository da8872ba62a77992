"""Fast Amaranth-simulator tests of the converter's parts and of small whole conversions."""

from __future__ import annotations

import gc
import random
import warnings

import numpy as np
import pytest
import torch
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.converter import Reg, compile_program, registers
from mncore_hdl.converter.behavioural import BehaviouralMemory
from mncore_hdl.converter.converter import LayoutConverter
from mncore_hdl.converter.harness import ConverterHarness
from mncore_hdl.converter.program import TableLoop, carries_table, walk_table
from mncore_hdl.converter.router import PortRouter
from mncore_hdl.converter.streams import gathered_signature
from mncore_hdl.converter.walker import LoopWalker
from mncore_hdl.converter.writer import WriteEngine
from mncore_hdl.layout import (
    DTYPES,
    UnsupportedConversion,
    conversion,
    host_layout,
    native_layout,
    to_device,
)
from mncore_hdl.layout.random_layouts import random_layout, random_shape
from mncore_hdl.top.system import MemorySystem

SMALL = MNCORE2_SIM.replace(sim_window_lw=4096, dram_bytes_per_group=4096 * 8)


def _simulate(dut, bench) -> None:
    """Run testbench ``bench`` on ``dut`` in Amaranth's simulator (1 MHz clock)."""
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


# -- constructor validation -------------------------------------------------------------------

@pytest.mark.parametrize("factory,exc,msg", [
    (lambda: LoopWalker(0, 1), ValueError, "Loop count must be a positive integer, not 0"),
    (lambda: LoopWalker(2, "a"), TypeError, "Quantity count must be an integer, not 'a'"),
    (lambda: LayoutConverter("cfg"), TypeError, "Config must be an ArchConfig"),
    (lambda: LayoutConverter(SMALL, buffer_lw=1000), ValueError,
     "Buffer size must be a power of two of at least 512 LW"),
    (lambda: LayoutConverter(SMALL, buffer_lw=2.0), TypeError, "Buffer size must be an integer"),
    (lambda: LayoutConverter(SMALL, write_burst=0), ValueError,
     "Write burst must be between 1 and 256, not 0"),
    (lambda: WriteEngine(SMALL, burst=-3), ValueError, "Write burst must be between 1 and 256"),
    (lambda: WriteEngine(SMALL, burst=None), TypeError, "Write burst must be an integer"),
    (lambda: BehaviouralMemory(SMALL, ports=0), ValueError,
     "Port count must be a positive integer, not 0"),
    (lambda: BehaviouralMemory(SMALL, latency=True), TypeError, "Latency must be an integer"),
    (lambda: BehaviouralMemory(None), TypeError, "Config must be an ArchConfig"),
    (lambda: MemorySystem({}), TypeError, "Config must be an ArchConfig"),
    (lambda: PortRouter("SMALL"), TypeError, "Config must be an ArchConfig"),
    (lambda: gathered_signature(None), TypeError, "Config must be an ArchConfig"),
])
def test_constructor_errors(factory, exc, msg):
    with warnings.catch_warnings():  # the half-built object is not an unused elaboratable
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc, match=msg):
            factory()
        gc.collect()


# -- port router: a request shown stays shown until taken ------------------------------------

def test_router_holds_a_shown_read_when_a_write_comes():
    """A read request for Group 0 is shown and refused; a write for Group 0 comes next. The
    router used to show the write at once (the port's payload changed before ready: a
    ``lib.stream`` violation the router proof found); the read stays until taken, then the
    write goes."""
    dut = PortRouter(SMALL)
    shown = []

    async def bench(ctx):
        ctx.set(dut.rd_valid[0][0], 1)
        ctx.set(dut.rd_addr[0][0], 0x40)
        ctx.set(dut.rd_len[0][0], 8)
        port = dut.ports[0].req
        for cycle in range(4):
            if cycle == 1:   # the write engine asks for Group 0 while the read waits
                ctx.set(dut.wr_valid[0], 1)
                ctx.set(dut.wr_group[0], 0)
                ctx.set(dut.wr_addr[0], 0x80)
                ctx.set(dut.wr_len[0], 4)
            ctx.set(port.ready, int(cycle == 2))
            shown.append((ctx.get(port.valid), ctx.get(port.p.write), ctx.get(port.p.addr),
                           ctx.get(dut.rd_ready[0][0]), ctx.get(dut.wr_ready[0])))
            if cycle == 2:   # the read is taken: the read engine moves on
                await ctx.tick()
                ctx.set(dut.rd_valid[0][0], 0)
                continue
            await ctx.tick()

    _simulate(dut, bench)
    read, write = (1, 0, 0x40), (1, 1, 0x80)
    assert [s[:3] for s in shown] == [read, read, read, write], shown
    assert [s[3:] for s in shown] == [(0, 0), (0, 0), (1, 0), (0, 0)], shown


def test_router_shares_a_port_round_robin_and_routes_beats_by_request():
    """Two engines read Group 1 at once: the port takes their requests in turn, and each
    returned burst's beats reach the engine that asked for it (the tag FIFO), not the other;
    with ``split`` engine 1 writes Group 1 and engine 0 may not."""
    dut = PortRouter(SMALL, 2)
    taken, beats = [], []

    async def bench(ctx):
        port = dut.ports[1]
        for e in range(2):
            ctx.set(dut.rd_valid[e][1], 1)
            ctx.set(dut.rd_addr[e][1], 0x10 * (e + 1))
            ctx.set(dut.rd_len[e][1], 2)
            ctx.set(dut.rdata_ready[e][1], 1)
        ctx.set(port.req.ready, 1)
        for _ in range(2):
            for e in range(2):
                if ctx.get(dut.rd_ready[e][1]):
                    taken.append((e, ctx.get(port.req.p.addr)))
            await ctx.tick()
        for e in range(2):
            ctx.set(dut.rd_valid[e][1], 0)
        ctx.set(port.rdata.valid, 1)
        for i in range(4):
            ctx.set(port.rdata.p.data, 100 + i)
            beats.append(tuple(ctx.get(dut.rdata_valid[e][1]) for e in range(2)))
            await ctx.tick()
        ctx.set(port.rdata.valid, 0)
        ctx.set(dut.split, 1)
        for e in range(2):
            ctx.set(dut.wr_valid[e], 1)
            ctx.set(dut.wr_group[e], 1)
        await ctx.delay(1e-9)
        assert ctx.get(port.req.p.write) and ctx.get(dut.wr_ready[1])
        assert not ctx.get(dut.wr_ready[0])

    _simulate(dut, bench)
    assert taken == [(0, 0x10), (1, 0x20)], taken
    assert beats == [(1, 0), (1, 0), (0, 1), (0, 1)], beats



def test_router_hold_shows_no_new_read_and_keeps_a_shown_one():
    """``hold`` (one engine's gather streams a full block into the Group): a read request
    that comes then is not shown; one already shown stays shown until taken (the stream
    rule), and reads show again once the hold ends."""
    dut = PortRouter(SMALL)
    shown = []

    async def bench(ctx):
        port = dut.ports[0].req
        ctx.set(dut.hold[0], 1)
        ctx.set(dut.rd_valid[0][0], 1)
        ctx.set(dut.rd_addr[0][0], 0x40)
        ctx.set(dut.rd_len[0][0], 8)
        for cycle in range(6):
            ctx.set(dut.hold[0], int(cycle in (0, 1, 3, 4)))
            ctx.set(port.ready, int(cycle == 4))
            await ctx.delay(1e-9)
            shown.append(ctx.get(port.valid))
            await ctx.tick()

    _simulate(dut, bench)
    # held (0, 1); shown when the hold drops (2); stays shown under the hold until taken (3, 4)
    assert shown == [0, 0, 1, 1, 1, 1], shown


@pytest.mark.parametrize("assured", [0, 1])
def test_writer_asks_ahead_of_its_beats_only_once_assured(assured):
    """Without ``assured`` a write request waits until its 32 beats are buffered (a read of
    its port could be what they wait for); with it (every read in) the first request is
    shown at once, before any beat, and holds until taken."""
    dut = WriteEngine(SMALL, 32)
    first = []

    async def bench(ctx):
        ctx.set(dut.cfg.dst_lwpg, 256)
        ctx.set(dut.cfg.dst_groups, 1)
        ctx.set(dut.group_hi, 1)
        ctx.set(dut.assured, assured)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.words.valid, 1)
        for cycle in range(40):
            ctx.set(dut.words.payload.addr, cycle)
            await ctx.delay(1e-9)
            if ctx.get(dut.req_valid) and not first:
                first.append((cycle, ctx.get(dut.req_len), ctx.get(dut.req_addr)))
            await ctx.tick()

    _simulate(dut, bench)
    cycle, length, addr = first[0]
    assert (length, addr) == (32, 0)
    assert cycle == (0 if assured else 32), first

# -- loop walker against the Python walk ------------------------------------------------------

def test_walker_matches_python_walk():
    rng = random.Random(7)
    loops = [(rng.randint(1, 4), (rng.randint(-5, 9), rng.randint(0, 40))) for _ in range(3)]
    table = carries_table(loops)
    want = list(walk_table(table, 2))
    dut = LoopWalker(4, 2)
    got = []

    async def bench(ctx):
        ctx.set(dut.n, len(table))
        for k, loop in enumerate(table):
            ctx.set(dut.extent[k], loop.extent)
            for q, c in enumerate(loop.carries):
                ctx.set(dut.carry[k][q], c)
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        ctx.set(dut.advance, 1)
        while True:
            got.append((ctx.get(dut.acc[0]), ctx.get(dut.acc[1])))
            if ctx.get(dut.last):
                break
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
    assert isinstance(table[0], TableLoop)


# -- whole conversions on the behavioural harness ---------------------------------------------

def _convert(seed: int):
    rng = random.Random(seed)
    while True:
        dtype = rng.choice(sorted(DTYPES))
        shape = random_shape(rng, max_numel=300)
        a = random_layout(rng, shape, dtype, max_lw_per_group=600)
        b = random_layout(rng, shape, dtype, max_lw_per_group=600)
        try:
            desc = conversion(a, b)
            prog = compile_program(desc, SMALL, buffer_lw=512)
        except (UnsupportedConversion, ValueError):
            continue
        break
    tensor = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return _run(a, b, desc, prog, tensor.to(getattr(torch, dtype)))


def _run(a, b, desc, prog, tensor, dst_group: int = 0):
    """``prog`` on the behavioural harness (destination from Group ``dst_group``): the
    layouts, the golden destination and what the RTL wrote."""
    src = to_device(tensor, a)
    base_src, base_dst = 0x40, 0x800
    init = [[0] * base_src + [int(x) for x in src[g]] if g < len(src) else [] for g in range(4)]
    dut = ConverterHarness(SMALL, latency=4, buffer_lw=512, init=init)
    result = {}

    async def bench(ctx):
        for addr, value in registers(prog, 0, base_src, dst_group, base_dst).items():
            ctx.set(dut.reg_addr, addr)
            ctx.set(dut.reg_wdata, value)
            ctx.set(dut.reg_we, 1)
            await ctx.tick()
        ctx.set(dut.reg_addr, Reg.CTRL)
        ctx.set(dut.reg_wdata, 1)
        await ctx.tick()
        ctx.set(dut.reg_we, 0)
        for _ in range(20000):
            await ctx.tick()
            if ctx.get(dut.done):
                break
        result["error"] = ctx.get(dut.error)
        result["image"] = np.array(
            [[ctx.get(dut.mems[dst_group + g].mem.data[base_dst + i])
              for i in range(desc.dst_lw_per_group)]
             for g in range(desc.dst_groups)], dtype=np.uint64)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return a, b, desc.execute(src), result


@pytest.mark.parametrize("seed", [1, 3])
def test_small_conversion(seed):
    a, b, want, result = _convert(seed)
    assert not result["error"], f"seed {seed}: {a} -> {b} raised the error flag"
    assert np.array_equal(result["image"], want), f"seed {seed}: {a} -> {b} differs"


def test_split_conversion_into_later_groups():
    """A split program (engine k writes destination Group k) whose destination starts at
    Group 2: each engine's writes reach the port of Group 2 + k (a router that gave Group g's
    port to engine g left them waiting for ever)."""
    a, b = host_layout((9, 13), "float16"), native_layout((9, 13), "float16", SMALL)
    desc = conversion(a, b)
    prog = compile_program(desc, SMALL, buffer_lw=512)
    assert prog.engines == 2
    tensor = torch.randn((9, 13), generator=torch.Generator().manual_seed(5)).half()
    _, _, want, result = _run(a, b, desc, prog, tensor, dst_group=2)
    assert not result["error"]
    assert np.array_equal(result["image"], want)
