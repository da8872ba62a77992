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
simulators run whole streams with no Python in the loop. The cases, the model and the runs
are ``mncore_hdl.testing.memctrl_bench``; this script prints them.

``--litedram`` runs the same streams through LiteDRAM's controller
(``mncore_hdl.testing.litedram_model``: crossbar, controller and ``SDRAMPHYModel`` of our
geometry and timings, Verilated) and prints its cycles beside ours; it needs the ``bench``
extra (``litedram``, ``migen``) and Verilator.
"""

from __future__ import annotations

import argparse
import time

from mncore_hdl.arch import ArchConfig
from mncore_hdl.memctrl.bound import bound_cycles
from mncore_hdl.memctrl.trafficgen import Mode
from mncore_hdl.testing.memctrl_bench import (
    CONFIG,
    CONFLICT_REACH,
    FR_FCFS,
    IDLE_CLASSES,
    PORT_COUNTS,
    SCHEDULERS,
    TRAFFIC,
    build,
    litedram_results,
    make_case,
    modeled,
    run_amaranth,
    run_breakdown,
    run_icarus,
    split_name,
)


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
        tr, p = split_name(name)
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
        tr, p = split_name(name)
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
    cases = [make_case(cfg, *split_name(n), args.lw) for n in names]
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
