"""The memory-controller bench's logic: its traffic cases, the analytic model of each, and
runs on Icarus (``tb_memctrl_bench``), in Amaranth's simulator, with the idle-cycle
breakdown, and through LiteDRAM (:mod:`.litedram_model`).

``bench/bench_memctrl.py`` prints the figures; the tests call these functions on short streams.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from unittest import mock

from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.contracts.memctrl import PORTS, csr_address
from mncore_hdl.memctrl import timing, trafficgen
from mncore_hdl.memctrl.bound import Traffic
from mncore_hdl.memctrl.trafficgen import RW, BenchTop, Mode
from mncore_hdl.paths import BUILD_ROOT
from mncore_hdl.tooling.verilog import export_verilog

__all__ = ["CONFIG", "CONFLICT_REACH", "FR_FCFS", "IDLE_CLASSES", "MAX_PORTS", "PORT_COUNTS",
           "SCHEDULERS", "TRAFFIC", "build", "idle_reason", "litedram_results",
           "load_generators", "make_case", "modeled", "port_base", "run_amaranth",
           "run_breakdown", "run_icarus", "split_name"]

CONFIG = MNCORE2_SIM
#: The reordering scheduler measured beside the in-order one (the default).
FR_FCFS = MNCORE2_SIM.replace(scheduler="fr_fcfs", scheduler_window=16,
                              scheduler_starvation_cap=16)
MAX_PORTS = len(PORTS)
#: Traffic name -> (generator mode, random directions, bound's traffic description).
TRAFFIC = {
    "read": (Mode.READ, RW.COIN, Traffic("sequential", 8, 1.0)),
    "write": (Mode.WRITE, RW.COIN, Traffic("sequential", 8, 0.0)),
    "mixed": (Mode.MIXED, RW.COIN, Traffic("sequential", 8, 0.5)),
    "rnd r/w": (Mode.RANDOM, RW.COIN, Traffic("random", 8, 0.5)),
    "rnd rd": (Mode.RANDOM, RW.READ, Traffic("random", 8, 1.0)),
    "rnd 2:1": (Mode.RANDOM, RW.TWO_ONE, Traffic("random", 8, 2 / 3)),
}
PORT_COUNTS = (1, 3)
#: ``--schedulers`` names.
SCHEDULERS = ("in_order", "fr_fcfs")
#: Column commands back within which a head's bank counts as taken by an earlier chunk.
CONFLICT_REACH = 4
#: Idle-cycle classes of ``--breakdown``, in print order (see :func:`idle_reason`).
IDLE_CLASSES = ("refresh", "no work", "bank taken", "row change", "act rate", "turnaround",
                "col gap")


def port_base(config: ArchConfig, i: int) -> int:
    """Each port's region: a quarter of the window apart, staggered by 5 banks."""
    return i * (config.sim_window_lw // 4 + 5 * config.row_lw)


def make_case(config: ArchConfig, traffic: str, ports: int, lw: int) -> dict:
    """Generator settings for ``ports`` ports each moving ``lw`` LWs."""
    row, bl = config.row_lw, config.timing.burst_length
    mode, rw, _ = TRAFFIC[traffic]
    gens = []
    for i in range(ports):
        base = port_base(config, i)
        if mode in (Mode.READ, Mode.WRITE):
            g = {"mode": mode, "base": base, "base2": 0, "count": lw // row, "blen": row}
        elif mode == Mode.MIXED:  # a copy: read half, write half, 8 banks apart
            g = {"mode": mode, "base": base, "base2": base + lw // 2 + 8 * row,
                 "count": lw // row, "blen": row}
        else:
            g = {"mode": mode, "base": 0, "base2": 0, "count": lw // bl, "blen": bl}
        gens.append({**g, "rw": rw})
    return {"name": f"{traffic}/{ports}", "ports": MAX_PORTS, "gens": gens}


def split_name(name: str) -> tuple[str, int]:
    """``"rnd r/w/3"`` -> ``("rnd r/w", 3)``."""
    tr, p = name.rsplit("/", 1)
    return tr, int(p)


#: Random traffic name -> direction changes per burst (``timing.random_cycles``).
DIRECTION_CHANGES = {"rnd r/w": 0.5, "rnd rd": 0.0, "rnd 2:1": 2 / 3}


def modeled(config: ArchConfig, traffic: str, total_lw: int, ports: int = 1) -> int:
    """The analytic model for the same trace (one data bus: ports share it)."""
    if traffic == "read":
        return timing.stream_cycles(config, total_lw, write=False)
    if traffic == "write":
        return timing.stream_cycles(config, total_lw, write=True)
    if traffic == "mixed":
        return timing.mixed_cycles(config, total_lw // 2, total_lw // 2)
    shape = TRAFFIC[traffic][2]
    return timing.random_cycles(config, total_lw, burst=shape.burst, ports=ports,
                                read_share=shape.read_share,
                                direction_changes=DIRECTION_CHANGES[traffic])


def build(config: ArchConfig) -> Path:
    """The bench top's Verilog for ``config`` (exported once per configuration)."""
    meta = {"component": "BenchTop", "ports": MAX_PORTS, "config": config.to_dict()}
    return export_verilog(lambda: BenchTop(config, MAX_PORTS), "memctrl_bench", meta,
                          BUILD_ROOT / "sim" / "verilog")


def run_icarus(verilog: Path, cases: list[dict], waves: bool, tag: str = "") -> list[dict]:
    """Run ``cases`` (:func:`make_case`) on Icarus in one cocotb run; their results, in order."""
    from mncore_hdl.testing.runner import BUILD_ROOT, run_cocotb

    out = BUILD_ROOT / f"memctrl_bench{tag}" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {"MC_BENCH_CASES": json.dumps(cases), "MC_BENCH_OUT": str(out),
           "COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING"}
    run_cocotb(verilog, "memctrl_bench", "tb_memctrl_bench", "run_cases", seed=1,
               test_name=f"memctrl_bench{tag}", extra_env=env, waves=waves)
    return json.loads(out.read_text())


async def load_generators(ctx, dut: BenchTop, case: dict) -> None:
    """Set every generator's parameters from ``case`` (count 0 on unused ports), one tick."""
    for i in range(MAX_PORTS):
        gen = case["gens"][i] if i < len(case["gens"]) else {"count": 0}
        for name, value in gen.items():
            ctx.set(getattr(dut, f"gen{i}_{name}"), value)
    await ctx.tick()


def run_amaranth(config: ArchConfig, case: dict, counters: tuple[str, ...] = ()) -> dict:
    """One case in Amaranth's simulator: ``{"cycles", "wall_s"}``, and with ``counters``
    (names of the per-port CSR counters, e.g. ``"read_beats"``) ``"counters"``: each used
    port's value of each, by ``(port, name)``, read through the CSR bus after the run."""
    from amaranth.sim import Simulator

    dut = BenchTop(config, MAX_PORTS)
    result: dict = {}

    async def bench(ctx):
        await load_generators(ctx, dut, case)
        t0 = time.perf_counter()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(dut.done)
        result.update(cycles=ctx.get(dut.cycles), wall_s=time.perf_counter() - t0)
        if counters:
            result["counters"] = {}
        for port in range(len(case["gens"]) if counters else 0):
            for name in counters:
                ctx.set(dut.csr_addr, csr_address(name, port))
                await ctx.tick()
                await ctx.tick()
                result["counters"][(port, name)] = ctx.get(dut.csr_rdata)

    sim = Simulator(dut)
    sim.add_clock(1.334e-9)
    sim.add_testbench(bench)
    sim.run()
    return result


def idle_reason(get, sched, cfg: ArchConfig, last_col: dict, issued: int) -> str:
    """Why the data bus moves no beat this cycle, as the scheduler's inputs show it.

    ``get`` reads a signal; ``last_col`` maps a bank to the index of the last column command
    to it and ``issued`` counts the column commands so far. A primary head whose row is not
    yet open and ready is *bank taken* when its bank served one of the last
    ``CONFLICT_REACH`` column commands (that chunk's row had to close first, so preparation
    could not have opened this one earlier), else a *row change* preparation did not hide.
    """
    if get(sched.refresh_want) or not get(sched.refresh_ready):
        return "refresh"
    if not get(sched.grant_valid):
        return "no work"
    head = sched.ports[get(sched.grant)]
    cb, bb = cfg.col_bits, cfg.bank_bits
    addr = get(head.head_addr)
    bank, row = (addr >> cb) & ((1 << bb) - 1), addr >> (cb + bb)
    state = sched.banks[bank]
    if get(state.is_open) and get(state.open_row) == row and get(state.col_ready):
        if get(sched.col) or get(head.head_oow):
            return "col gap"
        return "turnaround"  # tCCD or a read/write turnaround holds the column command
    if get(state.act_ready) and not get(sched.act_allowed) and not get(sched.act):
        return "act rate"
    taken = bank in last_col and issued - last_col[bank] <= CONFLICT_REACH
    return "bank taken" if taken else "row change"


def run_breakdown(config: ArchConfig, case: dict) -> collections.Counter:
    """One case in Amaranth's simulator: cycles with a beat (``"beat"``) and idle reasons."""
    from amaranth.sim import Simulator

    made = []

    def record(*args, **kwargs):
        mc = controller(*args, **kwargs)
        made.append(mc)
        return mc

    controller = trafficgen.MemoryController
    dut = BenchTop(config, MAX_PORTS)
    with mock.patch.object(trafficgen, "MemoryController", record):
        sim = Simulator(dut)  # elaborates the top: the controller is made here
    sched, eng = made[0].scheduler, made[0].engine
    counts: collections.Counter = collections.Counter()

    async def bench(ctx):
        await load_generators(ctx, dut, case)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        last_col: dict[int, int] = {}
        issued = 0
        while not ctx.get(dut.done):
            await ctx.tick()
            busy = ctx.get(eng.active)
            counts["beat" if busy else idle_reason(ctx.get, sched, config, last_col, issued)] += 1
            if ctx.get(sched.col):
                last_col[ctx.get(sched.bank)] = issued
                issued += 1

    sim.add_clock(1.334e-9)
    sim.add_testbench(bench)
    sim.run()
    return counts


def litedram_results(cfg: ArchConfig, lw: int, names: list[str], sim: str) -> dict:
    """Each case through LiteDRAM (:mod:`.litedram_model`), by name; ``sim`` is
    ``"verilator"`` (its Verilog, built once) or ``"migen"`` (migen's simulator, a few cycles
    a second: for tiny streams)."""
    from . import litedram_model

    cases = [make_case(cfg, *split_name(n), lw) for n in names]
    if sim == "migen":
        return {c["name"]: litedram_model.run_litedram(cfg, c) for c in cases}
    exe = litedram_model.build_verilated(cfg, check=True)
    return {c["name"]: litedram_model.run_verilated(exe, cfg, c) for c in cases}

