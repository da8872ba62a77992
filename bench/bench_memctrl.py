"""Memory controller figures: data-bus efficiency per traffic and port count, simulation speed
on Icarus and in Amaranth's simulator, and the analytic model's cycles next to the RTL's.

    ./exec_with_env.sh python bench/bench_memctrl.py            # several minutes
    ./exec_with_env.sh python bench/bench_memctrl.py --lw 4096 --no-speed  # about two
    ./exec_with_env.sh python bench/bench_memctrl.py --breakdown --lw 4096  # idle cycles
    ./exec_with_env.sh python bench/bench_memctrl.py --lw 1024 --no-speed \
        --patterns read/1 "rnd r/w/3" --schedulers fr_fcfs    # a quick subset
    ./exec_with_env.sh python bench/bench_memctrl.py --lw 4096 --no-speed --litedram

Each traffic runs on the in-order and on the ``fr_fcfs`` scheduler, side by side, with the
bound any scheduler could reach for it (``memctrl.bound.bound_cycles``) and each measurement
against it.

The RTL runs with a hardware traffic generator on each port (``memctrl.trafficgen``), so the
simulators run whole streams with no Python in the loop.

``--litedram`` runs the same streams through LiteDRAM's controller (``bench/litedram_model.py``:
crossbar, controller and ``SDRAMPHYModel`` of our geometry and timings, Verilated) and prints
its cycles beside ours; it needs the ``bench`` extra (``litedram``, ``migen``) and Verilator.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path
from unittest import mock

from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.contracts.memctrl import PORTS
from mncore_hdl.memctrl import timing, trafficgen
from mncore_hdl.memctrl.bound import Traffic, bound_cycles
from mncore_hdl.memctrl.trafficgen import RW, BenchTop, Mode
from mncore_hdl.tooling.verilog import export_verilog

ROOT = Path(__file__).resolve().parent.parent

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


def _split(name: str) -> tuple[str, int]:
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
    meta = {"component": "BenchTop", "ports": MAX_PORTS, "config": config.to_dict()}
    return export_verilog(lambda: BenchTop(config, MAX_PORTS), "memctrl_bench", meta,
                          ROOT / "build" / "sim" / "verilog")


def run_icarus(verilog: Path, cases: list[dict], waves: bool, tag: str = "") -> list[dict]:
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


def run_amaranth(config: ArchConfig, case: dict) -> dict:
    from amaranth.sim import Simulator

    dut = BenchTop(config, MAX_PORTS)
    result = {}

    async def bench(ctx):
        await load_generators(ctx, dut, case)
        t0 = time.perf_counter()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(dut.done)
        result.update(cycles=ctx.get(dut.cycles), wall_s=time.perf_counter() - t0)

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


def print_breakdown(lw: int) -> None:
    """Where the cycles of the random patterns go, for both schedulers (Amaranth simulator)."""
    print(f"Idle data-bus cycles, share of all cycles ({lw} LW per port, Amaranth simulator). "
          f"bank taken: the head's bank served one of the last {CONFLICT_REACH} column "
          "commands; row change: other PRE/tRP/ACT/tRCD waits; act rate: tRRD/tFAW; "
          "turnaround: tCCD, tWTR, tRTW; col gap: the cycle of the column command")
    hdr = (f"{'traffic':<8} {'ports':>5} {'sched':<8} {'eff':>6} "
           + " ".join(f"{c:>10}" for c in IDLE_CLASSES))
    print(hdr)
    print("-" * len(hdr))
    for tr, (mode, _, _) in TRAFFIC.items():
        if mode != Mode.RANDOM:
            continue
        for p in PORT_COUNTS:
            for label, cfg in (("in-order", CONFIG), ("fr_fcfs", FR_FCFS)):
                counts = run_breakdown(cfg, make_case(cfg, tr, p, lw))
                total = sum(counts.values())
                print(f"{tr:<8} {p:>5} {label:<8} {counts['beat'] / total:>6.3f} "
                      + " ".join(f"{counts[c] / total:>10.3f}" for c in IDLE_CLASSES))


def _measured(r: dict | None, beats: int, bnd: int) -> str:
    """``cycles eff /bnd`` of one run, or dashes for a scheduler not run."""
    if r is None:
        return f"{'-':>8} {'-':>6} {'-':>6}"
    c = r["cycles"]
    return f"{c:>8} {beats / c:>6.3f} {bnd / c:>6.3f}"


def _ratio(mod: int, r: dict | None) -> str:
    return f"{mod / r['cycles']:>7.3f}" if r else f"{'-':>7}"


def print_table(cfg: ArchConfig, lw: int, rtl: dict, fr: dict, names: list[str]) -> None:
    """Both schedulers side by side: raw efficiency and measured against the bound (a
    scheduler left out by ``--schedulers`` shows dashes); then each run's wall time."""
    t = cfg.timing
    print(f"\nMemory controller, {cfg.banks} banks, row {cfg.row_lw} LW, BL {t.burst_length}, "
          f"CL {t.cl}, tREFI {t.trefi}, tRFC {t.trfc}, tRRD {t.trrd}, tFAW {t.tfaw}, "
          f"tWTR {t.twtr}, tRTW {t.trtw}; {lw} LW per port; one data bus of 1 LW/cycle "
          "shared by the ports. eff = beats / cycles; /bnd = bound cycles / measured "
          "(memctrl.bound); fr_fcfs window "
          f"{FR_FCFS.scheduler_window}, cap {FR_FCFS.scheduler_starvation_cap}")
    hdr = (f"{'traffic':<8} {'ports':>5} {'beats':>6} {'bound':>6} {'bnd eff':>7} | "
           f"{'in-order':>8} {'eff':>6} {'/bnd':>6} | {'fr_fcfs':>8} {'eff':>6} {'/bnd':>6} | "
           f"{'model':>6} {'mod/RTL':>7} {'fr mod':>6} {'mod/RTL':>7}")
    print(hdr)
    print("-" * len(hdr))
    for name in names:
        tr, p = _split(name)
        beats = lw * p
        bnd = bound_cycles(cfg, TRAFFIC[tr][2], beats)
        a, b = rtl.get(name), fr.get(name)
        mod, mod_fr = modeled(cfg, tr, beats, p), modeled(FR_FCFS, tr, beats, p)
        print(f"{tr:<8} {p:>5} {beats:>6} {bnd:>6} {beats / bnd:>7.3f} | "
              f"{_measured(a, beats, bnd)} | {_measured(b, beats, bnd)} | "
              f"{mod:>6} {_ratio(mod, a)} {mod_fr:>6} {_ratio(mod_fr, b)}")
    from mncore_hdl.testing.runner import simulator

    print(f"\n{simulator().capitalize()} wall time per case (s; a loaded machine's figures "
          "are noisy):")
    print(f"{'case':<12} {'in-order':>9} {'fr_fcfs':>9}")
    for name in names:
        a, b = rtl.get(name), fr.get(name)
        print(f"{name:<12} " + " ".join(f"{r['wall_s']:>9.1f}" if r else f"{'-':>9}"
                                         for r in (a, b)))


def litedram_results(cfg: ArchConfig, lw: int, names: list[str], sim: str) -> dict:
    """Each case through LiteDRAM (``bench/litedram_model.py``), by name; ``sim`` is
    ``"verilator"`` (its Verilog, built once) or ``"migen"`` (migen's simulator, a few cycles
    a second: for tiny streams)."""
    from mlsdk.testing.benches import load_bench

    litedram_model = load_bench("litedram_model")
    cases = [make_case(cfg, *_split(n), lw) for n in names]
    if sim == "migen":
        return {c["name"]: litedram_model.run_litedram(cfg, c) for c in cases}
    exe = litedram_model.build_verilated(cfg, check=True)
    return {c["name"]: litedram_model.run_verilated(exe, cfg, c) for c in cases}


def print_litedram(cfg: ArchConfig, lw: int, rtl: dict, fr: dict, ld: dict,
                   names: list[str]) -> None:
    """Our two schedulers beside LiteDRAM on the same streams; ``LD/fr``: LiteDRAM's cycles
    over fr_fcfs's (above 1: ours is ahead); ``LD viol``: the rules LiteDRAM broke, as the PHY
    model's timing checker saw them (Verilator runs only)."""
    print(f"\nThe same streams through LiteDRAM (controller + crossbar + SDRAMPHYModel, "
          f"{cfg.banks} banks, rows of {cfg.row_lw} LW, one LW a cycle; "
          "docs/memory_controller.md): cycles and eff = beats / cycles")
    hdr = (f"{'traffic':<8} {'ports':>5} {'beats':>6} {'LD beats':>8} | {'in-order':>8} "
           f"{'eff':>6} | {'fr_fcfs':>8} {'eff':>6} | {'LiteDRAM':>8} {'eff':>6} | "
           f"{'LD/fr':>6} {'LD/in':>6} {'LD viol':>7}")
    print(hdr)
    print("-" * len(hdr))
    def col(r: dict | None, beats: int) -> str:
        return f"{r['cycles']:>8} {beats / r['cycles']:>6.3f}" if r else f"{'-':>8} {'-':>6}"

    def vs(c: dict, r: dict | None) -> str:
        return f"{c['cycles'] / r['cycles']:>6.3f}" if r else f"{'-':>6}"

    for name in names:
        tr, p = _split(name)
        beats = lw * p
        a, b, c = rtl.get(name), fr.get(name), ld[name]
        print(f"{tr:<8} {p:>5} {beats:>6} {c['beats']:>8} | {col(a, beats)} | "
              f"{col(b, beats)} | {col(c, beats)} | {vs(c, b)} {vs(c, a)} "
              f"{c.get('violations', '-'):>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lw", type=int, default=16384, help="LWs per port per case")
    ap.add_argument("--amaranth-lw", type=int, default=2048,
                    help="LWs of the Amaranth-simulator speed runs")
    ap.add_argument("--waves", action="store_true",
                    help="dump build/sim/memctrl_bench/memctrl_bench.vcd (slows Icarus down)")
    ap.add_argument("--no-speed", action="store_true",
                    help="skip the simulation-speed table")
    ap.add_argument("--breakdown", action="store_true",
                    help="only the idle-cycle breakdown of the random patterns (Amaranth "
                         "simulator, both schedulers), no Icarus runs")
    all_names = [f"{tr}/{p}" for tr in TRAFFIC for p in PORT_COUNTS]
    ap.add_argument("--patterns", nargs="+", metavar="NAME", default=all_names,
                    help="cases to run, as traffic/ports (default all: "
                         + ", ".join(all_names) + ")")
    ap.add_argument("--schedulers", nargs="+", choices=SCHEDULERS, default=list(SCHEDULERS),
                    help="schedulers to run (default both)")
    ap.add_argument("--litedram", action="store_true",
                    help="also run every case through LiteDRAM's controller and print it "
                         "beside ours (needs the bench extra: litedram, migen; and Verilator)")
    ap.add_argument("--litedram-sim", choices=("verilator", "migen"), default="verilator",
                    help="LiteDRAM's simulator: its Verilog on Verilator (default) or migen's "
                         "simulator (a few cycles a second: tiny --lw only)")
    args = ap.parse_args()
    unknown = [n for n in args.patterns if n not in all_names]
    if unknown:
        ap.error(f"unknown pattern(s) {', '.join(unknown)}; choose from {', '.join(all_names)}")
    if args.breakdown:
        print_breakdown(args.lw)
        return
    cfg = CONFIG

    t0 = time.perf_counter()
    verilog = build(cfg)
    verilog_fr = build(FR_FCFS)
    print(f"Verilog: {verilog}, {verilog_fr} ({time.perf_counter() - t0:.1f} s, cached per "
          "configuration)")
    names = [n for n in all_names if n in args.patterns]
    cases = [make_case(cfg, *_split(n), args.lw) for n in names]
    rtl, fr = {}, {}
    if "in_order" in args.schedulers:
        rtl = {r["name"]: r for r in run_icarus(verilog, cases, args.waves)}
    if "fr_fcfs" in args.schedulers:
        fr = {r["name"]: r for r in run_icarus(verilog_fr, cases, False, "_fr")}
    print_table(cfg, args.lw, rtl, fr, names)
    if args.litedram:
        ld = litedram_results(cfg, args.lw, names, args.litedram_sim)
        print_litedram(cfg, args.lw, rtl, fr, ld, names)
    if args.no_speed:
        return

    print(f"\nSimulation speed, same design and traffic ({args.amaranth_lw} LW, 1 port):")
    print(f"{'traffic':<8} {'simulator':<10} {'cycles':>8} {'wall s':>8} {'cycles/s':>10}")
    am_cases = [make_case(cfg, tr, 1, args.amaranth_lw) for tr in ("read", "rnd r/w")]
    ic = {r["name"]: r for r in run_icarus(verilog, am_cases, False)}
    for case in am_cases:
        a = run_amaranth(cfg, case)
        i = ic[case["name"]]
        tr = case["name"].split("/")[0]
        for name, r in (("Icarus", i), ("Amaranth", a)):
            print(f"{tr:<8} {name:<10} {r['cycles']:>8} {r['wall_s']:>8.2f} "
                  f"{r['cycles'] / r['wall_s']:>10,.0f}")


if __name__ == "__main__":
    main()
