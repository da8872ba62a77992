"""cocotb tests of the Group memory controller; launched one by one from sim/hdl/test_memctrl.py."""

from __future__ import annotations

import cocotb

from mncore_hdl.arch import LW_BITS
from mncore_hdl.contracts.memctrl import Cmd
from mncore_hdl.memctrl import timing
from mncore_hdl.settings import HDL

from .memctrl_agents import TB


async def check_counters(tb: TB) -> None:
    """Every performance counter against what the bench observed."""
    cols = tb.checker.counts["RD"] + tb.checker.counts["WR"]
    beats = sum(ch[5] for ch in tb.commands if Cmd(ch[1]).is_column)
    expect = {
        "row_misses": tb.misses,
        "row_hits": cols - tb.misses,
        "row_conflicts": tb.conflicts,
        "refreshes": tb.checker.counts["REF"],
    }
    for p in tb.ports:
        expect[f"port{p.i}.read_beats"] = p.read_beats
        expect[f"port{p.i}.write_beats"] = p.write_beats
        expect[f"port{p.i}.stall_cycles"] = p.stalls
    for name, want in expect.items():
        got = await tb.read_csr(name)
        if got != want:
            tb.error(f"counter {name}: expected {want}, actual {got}")
    now = tb.cycle
    cycles = await tb.read_csr("cycles")
    if abs(cycles - now) > 4:
        tb.error(f"counter cycles: expected about {now}, actual {cycles}")
    busy = await tb.read_csr("busy_cycles")
    if not beats <= busy <= cycles:
        tb.error(f"counter busy_cycles: expected within [{beats}, {cycles}], actual {busy}")
    trfc = tb.config.timing.trfc
    want_rc = sum(min(trfc, tb.cycle - 1 - r) for r in tb.checker.refreshes)
    rc = await tb.read_csr("refresh_cycles")
    if abs(rc - want_rc) > 4:
        tb.error(f"counter refresh_cycles: expected about {want_rc}, actual {rc}")
    tb.log.info("counters: %d columns (%d misses, %d conflicts), %d REF, busy %d of %d cycles",
                cols, tb.misses, tb.conflicts, tb.checker.counts["REF"], busy, cycles)


def random_request(tb: TB, port: int, hot_rows: int = 4):
    """A random request in a small hot region (so reads and writes overlap) or far away."""
    cfg, rng = tb.config, tb.rng
    bank_stride = cfg.banks * cfg.row_lw  # same bank, next row: forces row conflicts
    if rng.random() < 0.7:
        base = rng.randrange(hot_rows * cfg.row_lw)
    else:
        base = rng.randrange(4) * bank_stride + rng.randrange(cfg.row_lw)
    r = rng.random()
    if r < 0.5:
        length = rng.randint(1, cfg.timing.burst_length * 2)
    elif r < 0.8:
        length = rng.randint(1, cfg.row_lw // 2)
    else:
        length = rng.randint(1, cfg.row_lw)
    length = min(length, cfg.sim_window_lw - base)
    write = rng.random() < 0.5
    strb = [rng.choice([0xFF, 0xFF, rng.getrandbits(8)]) for _ in range(length)]
    return base, length, write, strb


@cocotb.test()
async def smoke(dut):
    """One burst per port written then read back; the store holds what the model holds."""
    tb = TB(dut)
    await tb.reset()
    for p in tb.ports:
        base = 100 + 1000 * p.i
        p.submit(base, 20, True)
        p.submit(base, 20, False)
    await tb.run_until_done()
    for p in tb.ports:
        base = 100 + 1000 * p.i
        for a in range(base, base + 20):
            if tb.mem_read(a) != tb.model.read(a):
                tb.error(f"store[{a:#x}]: expected {tb.model.read(a):#x}, "
                         f"actual {tb.mem_read(a):#x}")
    await check_counters(tb)
    tb.finish()


@cocotb.test()
async def random_traffic(dut):
    """All ports (or the first ``$MC_ACTIVE_PORTS``), random reads/writes/strobes/lengths, idle
    and back-pressure from the env."""
    tb = TB(dut, idle=HDL["MC_IDLE"].get(), backpressure=HDL["MC_BP"].get())
    await tb.reset()
    cfg = tb.config
    for _ in range(64):  # preloaded data, so reads of unwritten words are not all zero
        tb.mem_write(tb.rng.randrange(4 * cfg.row_lw), tb.rng.getrandbits(LW_BITS))
    cycles = HDL["MC_CYCLES"].get()
    target = 3 * cfg.timing.trefi if cycles is None else cycles
    ports = HDL["MC_ACTIVE_PORTS"].get()
    active = tb.ports[:len(tb.ports) if ports is None else ports]
    while tb.cycle < target:
        for p in active:
            while len(p.requests) < 4:
                a, n, w, s = random_request(tb, p.i)
                p.submit(a, n, w, strb=s)
        await tb.idle_cycles(200)
    await tb.run_until_done()
    if tb.checker.counts["REF"] < 2:
        tb.error(f"expected refreshes during traffic, saw {tb.checker.counts['REF']}")
    await check_counters(tb)
    tb.finish()


@cocotb.test()
async def ordering_strobes_rows(dut):
    """RAW/WAW on one port, byte enables, bursts across row boundaries and a whole-row burst."""
    tb = TB(dut)
    await tb.reset()
    cfg, p = tb.config, tb.ports[0]
    row = cfg.row_lw
    p.submit(row - 3, 10, True)                            # crosses a row (and bank)
    p.submit(row - 3, 10, True, strb=[0x0F, 0xF0, 0x01, 0x80, 0, 0xFF, 0x3C, 0xC3, 0x55, 0xAA])
    p.submit(row - 5, 12, False)                           # RAW over both writes
    p.submit(2 * row + 7, row, True)                       # max burst, crosses a row
    p.submit(2 * row + 7, row, False)
    p.submit(5, 1, True)
    p.submit(5, 1, True)                                   # WAW: the second one wins
    p.submit(5, 1, False)
    await tb.run_until_done()
    await check_counters(tb)
    tb.finish()


@cocotb.test()
async def latency(dut):
    """Row-hit, row-miss and row-conflict read latency equal the formulas of timing.py."""
    tb = TB(dut)
    await tb.reset()
    cfg, p = tb.config, tb.ports[0]
    stride = cfg.banks * cfg.row_lw
    measured = {}
    for kind, addr in (("miss", 0), ("hit", 8), ("conflict", stride)):
        await tb.idle_cycles(cfg.timing.tras + 20)
        n_before = len(p.read_log)
        p.submit(addr, 1, False)
        await tb.run_until_done()
        accept = p.accepted[-1][0]
        first = p.read_log[n_before][0]
        measured[kind] = first - accept
        want = timing.read_latency(cfg, kind)
        tb.log.info("%s latency: %d cycles (formula %d)", kind, measured[kind], want)
        if measured[kind] != want:
            tb.error(f"{kind} latency: expected {want} cycles, actual {measured[kind]}")
    tb.finish()


@cocotb.test()
async def refresh_interval(dut):
    """Idle: REF every tREFI exactly; under traffic: each REF late by a bounded amount only."""
    tb = TB(dut)
    await tb.reset()
    t = tb.config.timing
    await tb.idle_cycles(3 * t.trefi + 10)
    refs = tb.checker.refreshes
    gaps = [b - a for a, b in zip(refs, refs[1:], strict=False)]
    tb.log.info("idle refreshes at %s, gaps %s (tREFI %d)", refs, gaps, t.trefi)
    if len(refs) != 3 or any(g != t.trefi for g in gaps):
        tb.error(f"idle refresh: expected 3 REF {t.trefi} cycles apart, actual at {refs}")
    first = refs[0] if refs else 0
    # traffic on every port: each REF must come within a bound of its due time
    for p in tb.ports:
        for k in range(12):
            p.submit(p.i * 4096 + k * 256, 256, bool(k % 2))
    await tb.run_until_done()
    bound = t.tras + t.twr + t.trp + 2 * t.burst_length + 8
    for k, r in enumerate(tb.checker.refreshes):
        late = r - (first + k * t.trefi)
        if not 0 <= late <= bound:
            tb.error(f"REF #{k} at cycle {r}: expected 0..{bound} cycles after its due time, "
                     f"actual {late}")
    tb.log.info("refreshes under traffic: %s", tb.checker.refreshes)
    tb.finish()


@cocotb.test()
async def out_of_range(dut):
    """Accesses past the window raise the flag with the first bad address; no wrap-around."""
    tb = TB(dut)
    await tb.reset()
    cfg, p = tb.config, tb.ports[1]
    win = cfg.sim_window_lw
    if int(dut.error.value):
        tb.error("error flag set after reset")
    p.submit(win - 4, 12, True)    # last 4 beats land, 8 are dropped
    p.submit(win - 4, 12, False)   # 4 good beats, then 8 error beats
    p.submit(0, 8, False)          # nothing wrapped to address 0
    await tb.run_until_done()
    if not int(dut.error.value):
        tb.error("error flag not raised")
    got = int(dut.error_addr.value)
    if got != win:
        tb.error(f"error address: expected {win:#x}, actual {got:#x}")
    if await tb.read_csr("error") != 1 or await tb.read_csr("error_addr") != win:
        tb.error("error registers disagree with the error outputs")
    errs = [e for _, _, e in p.read_log]
    if errs[:12] != [0] * 4 + [1] * 8:
        tb.error(f"read error bits: expected 4x0 then 8x1, actual {errs[:12]}")
    for a in range(8):
        if tb.mem_read(a) != 0:
            tb.error(f"store[{a}] = {tb.mem_read(a):#x}: an out-of-window write wrapped")
    dut.error_clear.value = 1
    await tb.step()
    dut.error_clear.value = 0
    await tb.step()
    if int(dut.error.value):
        tb.error("error flag not cleared by error_clear")
    await check_counters(tb)
    tb.finish()


@cocotb.test()
async def stream_vs_model(dut):
    """A sequential one-port stream: cycles within 10% of timing.stream_cycles."""
    tb = TB(dut)
    await tb.reset()
    cfg, p = tb.config, tb.ports[0]
    lw = HDL["MC_STREAM_LW"].get()
    for write in (True, False):
        await tb.idle_cycles(cfg.timing.tras)
        for k in range(lw // cfg.row_lw):
            p.submit(k * cfg.row_lw, cfg.row_lw, write)
        start = tb.cycle
        await tb.run_until_done()
        last = (p.read_log[-1][0] if not write else tb.commands[-1][0] + tb.commands[-1][5])
        measured = last - start + 1
        model = timing.stream_cycles(cfg, lw, write=write)
        tb.log.info("%s stream of %d LW: %d cycles, model %d, efficiency %.3f",
                    "write" if write else "read", lw, measured, model, lw / measured)
        if abs(measured - model) > 0.1 * model:
            tb.error(f"{'write' if write else 'read'} stream: expected {model} cycles +-10%, "
                     f"actual {measured}")
    await check_counters(tb)
    tb.finish()


@cocotb.test()
async def fairness(dut):
    """Backlogged ports get column commands in strict rotation; a port that never takes its
    read data (or never sends its write data) stalls only itself."""
    tb = TB(dut)
    await tb.reset()
    cfg = tb.config
    for p in tb.ports:
        for k in range(6):
            p.submit(p.i * 3 * cfg.row_lw + k * 64, 64, False)
    await tb.run_until_done()
    cols = [c[4] for c in tb.commands if Cmd(c[1]).is_column]
    per_port = len(cols) // tb.nports
    head = cols[:per_port * tb.nports - tb.nports]  # while every port is still backlogged
    runs = [i for i in range(1, len(head)) if head[i] == head[i - 1]]
    tb.log.info("column order (first 24): %s", cols[:24])
    if runs:
        tb.error(f"round-robin: expected no port twice in a row, actual at columns {runs[:5]}")

    # port 0 holds rdata.ready low and owes write data: ports 1 and 2 must still finish
    stuck = tb.ports[0]
    stuck.backpressure = 1.0
    stuck.submit(0, 200, False)
    stuck.requests.append((4096, 16, True))   # a write whose data never comes
    for p in tb.ports[1:]:
        for k in range(8):
            p.submit(8192 + p.i * 1024 + k * 64, 64, bool(k % 2))
    for _ in range(3000):
        await tb.step()
        if not any(p.requests or p.expected or p.wbeats for p in tb.ports[1:]):
            break
    for p in tb.ports[1:]:
        if p.requests or p.expected or p.wbeats:
            tb.error(f"port {p.i} blocked behind a stalled port 0")
    tb.finish()
