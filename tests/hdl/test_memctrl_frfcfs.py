"""The FR-FCFS arbiter (mncore_hdl.memctrl.frfcfs) in Amaranth's simulator: its key's order."""

from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.memctrl.frfcfs import FrFcfs
from mncore_hdl.memctrl.reorder import ReorderFrontend, rob_slots, write_buffer_beats
from mncore_hdl.memctrl.requester import PortFrontend
from mncore_hdl.memctrl.signatures import HeadSignature
from mncore_hdl.testing import memctrl_bench as bench
from mncore_hdl.testing.hdl_checks import expect_error

TINY = MNCORE2_SIM.replace(
    banks=4, row_lw=32, sim_window_lw=512, scheduler="fr_fcfs", scheduler_starvation_cap=2,
    timing=DramTiming(cl=4, trcd=3, trp=3, tras=8, twr=3, trefi=300, trfc=20, burst_length=8))


def addr_of(bank, row):
    return (row << (TINY.col_bits + TINY.bank_bits)) | (bank << TINY.col_bits)


def run(script, config=TINY, ports=3):
    """``script``: per cycle ``(eligible ports, {port: (bank, row, write)}, open rows by bank,
    advance)``; returns the grant of each cycle."""
    dut = FrFcfs(config, ports)
    grants = []

    async def bench(ctx):
        ctx.set(dut.bus_free, 1)
        ctx.set(dut.rd_allowed, 1)
        ctx.set(dut.wr_allowed, 1)
        for eligible, heads, rows, advance in script:
            ctx.set(dut.requests, sum(1 << p for p in eligible))
            for p, (bank, row, write) in heads.items():
                ctx.set(dut.heads[p].head_valid, 1)
                ctx.set(dut.heads[p].head_addr, addr_of(bank, row))
                ctx.set(dut.heads[p].head_write, write)
            for b, view in enumerate(dut.banks):
                ctx.set(view.is_open, b in rows)
                ctx.set(view.open_row, rows.get(b, 0))
                ctx.set(view.col_ready, b in rows)
            ctx.set(dut.advance, advance)
            grants.append(ctx.get(dut.grant))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return grants


def test_oldest_then_ready_then_same_direction():
    heads = {0: (0, 1, 0), 1: (1, 1, 0), 2: (2, 1, 1)}
    script = [((1,), heads, {}, 0)] * 3            # port 1 waits alone
    script += [((0, 1, 2), heads, {}, 0)] * 2      # all wait, none ready: the oldest, port 1
    script += [((0, 1, 2), heads, {2: 1}, 0)]      # port 2's row is open: ready goes first
    g = run(script)
    assert g[3:5] == [1, 1] and g[5] == 2
    # two ready heads, the last column a write (port 2's): the write goes first, though younger
    script = [((0, 2), heads, {0: 1, 2: 1}, 0)] * 2
    script += [((0, 2), heads, {2: 1}, 1)]         # port 2 writes (advance, it is granted)
    script += [((0, 2), {0: (0, 1, 0), 2: (3, 1, 1)}, {0: 1, 3: 1}, 0)]
    g = run(script)
    assert g[0] == 0 and g[3] == 2


def test_starvation_cap():
    heads = {0: (0, 1, 0), 1: (1, 1, 0)}
    # port 1 never ready; port 0 always ready and served: after cap = 2 of its columns,
    # port 1 goes first
    script = [((0, 1), heads, {0: 1}, 1)] * 2 + [((0, 1), heads, {0: 1}, 0)]
    assert run(script) == [0, 0, 1]


CAP1 = TINY.replace(scheduler_starvation_cap=1)
HEADS3 = {0: (0, 1, 0), 1: (1, 1, 0), 2: (2, 1, 0)}


def test_starving_ports_go_oldest_first_ready_or_not():
    """Cap 1, three ports, port 2's row never open: ports 0 and 1 re-starve after each other's
    issue. Were the ready ones first among the starving, they would take turns for ever
    (0, 1, 0, 1 ...: the bug the arbiter proof found); oldest first, port 2 goes third."""
    script = [((0, 1, 2), HEADS3, {0: 1, 1: 1}, 1)] * 3
    assert run(script, CAP1) == [0, 1, 2]


def test_age_order_survives_a_long_wait():
    """Port 1 comes first, port 2 next, port 0 last; port 0 (ready) and port 1 (starving,
    oldest) are served; then 300 cycles pass with no issue and no row open. Port 2 is older
    than port 0 (which came back after its issue), both starving: port 2 goes. A saturating
    count of waited cycles made them tie after 255, and the lower port won: a third pass."""
    script = [((1,), HEADS3, {}, 0), ((1, 2), HEADS3, {}, 0),
              ((0, 1, 2), HEADS3, {0: 1}, 1), ((0, 1, 2), HEADS3, {0: 1}, 1)]
    script += [((0, 2), HEADS3, {}, 0)] * 300
    g = run(script, CAP1)
    assert g[2:4] == [0, 1] and set(g[4:]) == {2}, (g[:6], g[-3:])


def test_validation():
    expect_error(TypeError, "Config must be an ArchConfig, not 7", FrFcfs, 7, 2)
    expect_error(ValueError, "Port count must be a positive integer, not 0", FrFcfs, TINY, 0)
    expect_error(TypeError, "Queue depth must be an integer, not 'x'", PortFrontend, TINY, "x")
    expect_error(ValueError, "Queue depth must be a positive integer, not 0",
                 PortFrontend, TINY, 0)
    expect_error(ValueError, "Queued requests ahead must be a non-negative integer, not -1",
                 HeadSignature, TINY, -1)
    expect_error(TypeError, "Config must be an ArchConfig, not 7", ReorderFrontend, 7)
    expect_error(TypeError, "Queue depth must be an integer, not 'x'", ReorderFrontend, TINY,
                 "x")
    expect_error(ValueError, "Queue depth must be a positive integer, not 0",
                 ReorderFrontend, TINY, 0)


def test_reorder_buffer_sizes():
    # the window plus the in-order read FIFO (CL + 2 BL + 8 = 28 beats: 4 bursts), rounded up
    assert rob_slots(TINY, 8) == 16 and rob_slots(TINY, 4) == 8
    # the in-order write FIFO (2 BL + 4 = 20) plus half the window's bursts plus one burst
    assert write_buffer_beats(TINY, 8) == 64 and write_buffer_beats(TINY, 16) == 128


def test_breakdown_accounts_for_every_cycle():
    """``--breakdown``: every cycle is a beat or one idle class, and the classes the
    reordering scheduler still meets are told apart."""
    cfg = bench.FR_FCFS
    counts = bench.run_breakdown(cfg, bench.make_case(cfg, "rnd rd", 1, 512))
    assert counts["beat"] == 512
    assert set(counts) <= {"beat", *bench.IDLE_CLASSES}, counts
    assert counts["bank taken"] > 0, counts
