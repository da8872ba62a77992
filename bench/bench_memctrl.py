"""Memory controller figures: data-bus efficiency per traffic and port count, simulation speed
on Icarus and in Amaranth's simulator, and the analytic model's cycles next to the RTL's.

    ./exec_with_env.sh python bench/bench_memctrl.py            # a few minutes
    ./exec_with_env.sh python bench/bench_memctrl.py --lw 4096  # quicker

The RTL runs with a hardware traffic generator on each port (``memctrl.trafficgen``), so the
simulators run whole streams with no Python in the loop.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.contracts.memctrl import PORTS
from mncore_hdl.memctrl import timing
from mncore_hdl.memctrl.trafficgen import BenchTop, Mode
from mncore_hdl.tooling.verilog import export_verilog

ROOT = Path(__file__).resolve().parent.parent

CONFIG = MNCORE2_SIM
MAX_PORTS = len(PORTS)
TRAFFIC = ("read", "write", "mixed", "random")


def port_base(config: ArchConfig, i: int) -> int:
    """Each port's region: a quarter of the window apart, staggered by 5 banks."""
    return i * (config.sim_window_lw // 4 + 5 * config.row_lw)


def make_case(config: ArchConfig, traffic: str, ports: int, lw: int) -> dict:
    """Generator settings for ``ports`` ports each moving ``lw`` LWs."""
    row, bl = config.row_lw, config.timing.burst_length
    gens = []
    for i in range(ports):
        base = port_base(config, i)
        if traffic in ("read", "write"):
            mode = Mode.READ if traffic == "read" else Mode.WRITE
            g = {"mode": mode, "base": base, "base2": 0, "count": lw // row, "blen": row}
        elif traffic == "mixed":  # a copy: read half, write half, 8 banks apart
            g = {"mode": Mode.MIXED, "base": base, "base2": base + lw // 2 + 8 * row,
                 "count": lw // row, "blen": row}
        else:
            g = {"mode": Mode.RANDOM, "base": 0, "base2": 0, "count": lw // bl, "blen": bl}
        gens.append(g)
    return {"name": f"{traffic}/{ports}", "ports": MAX_PORTS, "gens": gens}


def modeled(config: ArchConfig, traffic: str, total_lw: int) -> int | None:
    """The analytic model for the same trace (one data bus: ports share it)."""
    if traffic == "read":
        return timing.stream_cycles(config, total_lw, write=False)
    if traffic == "write":
        return timing.stream_cycles(config, total_lw, write=True)
    if traffic == "mixed":
        return timing.mixed_cycles(config, total_lw // 2, total_lw // 2)
    return None


def build(config: ArchConfig) -> Path:
    meta = {"component": "BenchTop", "ports": MAX_PORTS, "config": config.to_dict()}
    return export_verilog(lambda: BenchTop(config, MAX_PORTS), "memctrl_bench", meta,
                          ROOT / "build" / "sim" / "verilog")


def run_icarus(verilog: Path, cases: list[dict], waves: bool) -> list[dict]:
    from mncore_hdl.testing.runner import BUILD_ROOT, run_cocotb

    out = BUILD_ROOT / "memctrl_bench" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {"MC_BENCH_CASES": json.dumps(cases), "MC_BENCH_OUT": str(out),
           "COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING"}
    run_cocotb(verilog, "memctrl_bench", "tb_memctrl_bench", "run_cases", seed=1,
               test_name="memctrl_bench", extra_env=env, waves=waves)
    return json.loads(out.read_text())


def run_amaranth(config: ArchConfig, case: dict) -> dict:
    from amaranth.sim import Simulator

    dut = BenchTop(config, MAX_PORTS)
    result = {}

    async def bench(ctx):
        for i in range(MAX_PORTS):
            gen = case["gens"][i] if i < len(case["gens"]) else {"count": 0}
            for name, value in gen.items():
                ctx.set(getattr(dut, f"gen{i}_{name}"), value)
        await ctx.tick()
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lw", type=int, default=16384, help="LWs per port per case")
    ap.add_argument("--amaranth-lw", type=int, default=2048,
                    help="LWs of the Amaranth-simulator speed runs")
    ap.add_argument("--waves", action="store_true",
                    help="dump build/sim/memctrl_bench/memctrl_bench.vcd (slows Icarus down)")
    args = ap.parse_args()
    cfg = CONFIG

    t0 = time.perf_counter()
    verilog = build(cfg)
    print(f"Verilog: {verilog} ({time.perf_counter() - t0:.1f} s, cached per configuration)")
    cases = [make_case(cfg, tr, p, args.lw) for tr in TRAFFIC for p in (1, 2, 3)]
    rtl = {r["name"]: r for r in run_icarus(verilog, cases, args.waves)}

    t = cfg.timing
    print(f"\nMemory controller, {cfg.banks} banks, row {cfg.row_lw} LW, BL {t.burst_length}, "
          f"CL {t.cl}, tREFI {t.trefi}, tRFC {t.trfc}; {args.lw} LW per port; "
          "one data bus of 1 LW/cycle shared by the ports")
    hdr = (f"{'traffic':<8} {'ports':>5} {'beats':>7} {'RTL cyc':>8} {'eff':>6} "
           f"{'model cyc':>9} {'model/RTL':>9} {'Icarus cyc/s':>12}")
    print(hdr)
    print("-" * len(hdr))
    for tr in TRAFFIC:
        for p in (1, 2, 3):
            r = rtl[f"{tr}/{p}"]
            beats = args.lw * p
            mod = modeled(cfg, tr, beats)
            ratio = f"{mod / r['cycles']:.3f}" if mod else "-"
            print(f"{tr:<8} {p:>5} {beats:>7} {r['cycles']:>8} {beats / r['cycles']:>6.3f} "
                  f"{mod if mod else '-':>9} {ratio:>9} {r['cycles'] / r['wall_s']:>12,.0f}")

    print(f"\nSimulation speed, same design and traffic ({args.amaranth_lw} LW, 1 port):")
    print(f"{'traffic':<8} {'simulator':<10} {'cycles':>8} {'wall s':>8} {'cycles/s':>10}")
    am_cases = [make_case(cfg, tr, 1, args.amaranth_lw) for tr in ("read", "random")]
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
