"""Layout converter figures: conversion efficiency on the memory-system top (Icarus), and the
analytic model's cycles (``mncore_hdl.converter.timing``) next to the RTL's.

    ./exec_with_env.sh python bench/bench_converter.py             # a few minutes
    ./exec_with_env.sh python bench/bench_converter.py --max-kib 64  # quicker
    ./exec_with_env.sh python bench/bench_converter.py --pairs transpose,native --max-kib 16
    ./exec_with_env.sh python bench/bench_converter.py --breakdown --sizes 16  # idle bus cycles

Two efficiencies per row, both over the RTL cycles (the converter's ``busy_cycles``, start to
done):

- ``eff``: (bytes read + bytes written) / (cycles x 8 bytes), i.e. against ONE port moving one LW
  per cycle; conversions spread over several Groups exceed 100% because each Group has its own
  data bus;
- ``bus eff``: against the honest bound, the busiest Group's data bus. Each Group's controller
  moves at most one LW (8 bytes) per cycle, reads and writes alike, so no conversion can take
  fewer cycles than max over Groups of (LWs read + LWs written on that Group); ``bus eff`` is
  that bound / the RTL cycles, at most 100%; ``RTL/bus`` is its inverse;
- ``bound``: the tightest of three resources (``binds`` names it; :func:`bounds`): that bus,
  the busiest Group's activates, and the converter's buffer (one destination LW a cycle),
  each with refresh's share; ``RTL/bnd`` against it. The goal line: every 1 MiB pair within
  1.15x of its bound and the model within 5% of the RTL.

Conversions up to 64 KiB are also checked word for word against the golden model.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import tempfile
from pathlib import Path

from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.cosim import BACKING_STORE
from mncore_hdl.converter import compile_program
from mncore_hdl.converter.timing import conversion_cycles, row_miss_gap
from mncore_hdl.layout import Layout, conversion, host_layout, native_layout
from mncore_hdl.memctrl.bound import Traffic, refresh_dead_cycles

CONFIG = MNCORE2_SIM
SIZES_KIB = (4, 16, 64, 256, 1024)
CHECK_KIB = 64


def _square(kib: int, elem_bytes: int) -> tuple[int, int]:
    n = kib * 1024 // elem_bytes
    rows = 2 ** (int(math.log2(n)) // 2)
    return rows, n // rows


def pairs(kib: int) -> list[tuple[str, Layout, Layout, tuple, tuple]]:
    """(name, src, dst, src base, dst base) for one size; pairs that do not fit are left out."""
    out = []
    r, c = _square(kib, 4)
    single = kib * 1024 // 8 <= CONFIG.sim_window_lw // 2
    if single:
        h, n = host_layout((r, c), "float32"), native_layout((r, c), "float32", CONFIG)
        out.append(("host->native fp32", h, n, (0, 0), (0, CONFIG.sim_window_lw // 2)))
        hb, nb = host_layout((r, c * 2), "bfloat16"), native_layout((r, c * 2), "bfloat16", CONFIG)
        out.append(("native->host bf16", nb, hb, (0, 0), (0, CONFIG.sim_window_lw // 2)))
        t = Layout.parse(f"({r},{c})/(({r // 2}:1, 2_W:1), ({c}:{r // 2}))", "float32")
        out.append(("transpose fp32", h, t, (0, 0), (0, CONFIG.sim_window_lw // 2)))
    cyc = Layout.parse(f"({r},{c})/(({r // 4}:{c // 2}, 4_G:1), ({c // 2}:1, 2_W:1))")
    blk = Layout.parse(f"({r},{c})/((4_G:1, {r // 4}:{c // 2}), ({c // 2}:1, 2_W:1))")
    out.append(("group redistribution", cyc, blk, (0, 0), (0, CONFIG.sim_window_lw // 2)))
    if single:
        # Native over four Groups to host in Group 0, shape (N, 64): every block reads Group 0
        # while the writer streams into it, so Group 0's bus carries both streams.
        n = kib * 1024 // (64 * 4)
        out.append(("native->host fp32 shared G0", native_layout((n, 64), "float32", CONFIG),
                    host_layout((n, 64), "float32"), (0, 0), (0, CONFIG.sim_window_lw // 2)))
    return out


def extra_pairs() -> list[tuple[str, Layout, Layout, tuple, tuple]]:
    """Fixed-shape rows run only when ``--pairs`` names them (not part of the size sweep)."""
    shape = (33, 65)  # odd: padded tiles, masked positions
    return [("native->host fp32 odd 33x65 shared G0",
             native_layout(shape, "float32", CONFIG), host_layout(shape, "float32"),
             (0, 0), (0, CONFIG.sim_window_lw // 2))]


def busiest_bus_lw(src: Layout, dst: Layout, src_group: int, dst_group: int) -> int:
    """LWs the busiest Group's data bus carries: max over Groups of reads + writes there.

    The source occupies ``src.lw_per_group`` LWs in each of its ``src.groups`` Groups from
    ``src_group`` on; the destination likewise. At one LW per cycle per Group bus this is the
    fewest cycles any converter could take.
    """
    per_group = [0] * CONFIG.groups
    for layout, first in ((src, src_group), (dst, dst_group)):
        for g in range(first, first + layout.groups):
            per_group[g % CONFIG.groups] += layout.lw_per_group
    return max(per_group)


#: Classes of ``--breakdown``, in print order (see :func:`bus_state`).
BUS_CLASSES = ("beat", "refresh", "dram wait", "writes elsewhere", "halves held", "no work")


def bus_state(get, g: int, conv, mc) -> str:
    """What Group ``g``'s data bus does this cycle, as the converter and controller show it.

    ``beat``: a beat moves. ``refresh``: a refresh is due or running. ``dram wait``: the
    converter has work at ``g`` (a request shown, read bursts outstanding, write beats
    offered) that the controller has not yet reached (row change, CAS latency, turnaround).
    ``writes elsewhere``: nothing for ``g``, while a write stream serves another Group.
    ``halves held``: nothing for ``g``, no writes anywhere, both buffer halves of an engine
    taken (its reader waits for its gather). ``no work``: none of these (start, end, walk gaps).
    """
    engines = conv.all_engines
    if get(mc.engine.active):
        return "beat"
    sched = mc.scheduler
    if get(sched.refresh_want) or not get(sched.refresh_ready):
        return "refresh"
    port = conv.ports[g]
    if (get(port.req.valid) or get(port.wdata.valid)
            or any(get(reader.rdata_ready[g]) for reader, _, _ in engines)):
        return "dram wait"
    if any(get(writer.req_valid) or any(get(v) for v in writer.wdata_valid)
           for _, _, writer in engines):
        return "writes elsewhere"
    if any(get(reader.claimed) == 0b11 for reader, _, _ in engines):
        return "halves held"
    return "no work"


def run_breakdown(case: dict) -> list[collections.Counter]:
    """One conversion in Amaranth's simulator: per Group, cycles of each :data:`BUS_CLASSES`."""
    from amaranth.sim import Simulator
    from mncore_hdl.contracts.converter import CTRL_START, Reg
    from mncore_hdl.converter import registers
    from mncore_hdl.top.system import MemorySystem

    src, dst = Layout.parse(case["src"], case["dtype"]), Layout.parse(case["dst"], case["dtype"])
    prog = compile_program(conversion(src, dst), CONFIG)
    regs = registers(prog, *case["src_base"], *case["dst_base"])
    dut = MemorySystem(CONFIG)
    counts = [collections.Counter() for _ in range(CONFIG.groups)]

    async def bench(ctx):
        for addr, value in {**regs, Reg.CTRL: CTRL_START}.items():
            ctx.set(dut.reg_addr, addr)
            ctx.set(dut.reg_wdata, value)
            ctx.set(dut.reg_we, 1)
            await ctx.tick()
        ctx.set(dut.reg_we, 0)
        await ctx.tick()
        while ctx.get(dut.busy):
            for g, mc in enumerate(dut.controllers):
                counts[g][bus_state(ctx.get, g, dut.converter, mc)] += 1
            await ctx.tick()

    sim = Simulator(dut)  # elaborates: the engines and controller parts exist from here
    sim.add_clock(1.334e-9)
    sim.add_testbench(bench)
    sim.run()
    return counts


def print_breakdown(cases: list[dict]) -> None:
    """Per pair and Group, where the data bus's cycles go (Amaranth simulator)."""
    print("Group data-bus cycles while the converter is busy, share of its busy cycles "
          "(Amaranth simulator; classes: bench_converter.bus_state)")
    hdr = (f"{'pair':<29}{'size':>9} {'G':>2} {'cycles':>7} "
           + " ".join(f"{c:>16}" for c in BUS_CLASSES))
    print(hdr)
    print("-" * len(hdr))
    for case in cases:
        for g, counts in enumerate(run_breakdown(case)):
            total = sum(counts.values())
            print(f"{case['pair']:<29}{case['kib']:>6} KiB {g:>2} {total:>7} "
                  + " ".join(f"{counts[c] / total:>16.3f}" for c in BUS_CLASSES))


def activate_lw(src: Layout, dst: Layout, src_group: int, dst_group: int) -> float:
    """The busiest Group's activates, in cycles: row opens there times the fewest cycles per ACT.

    A Group opens every row of its part of the source and the destination once, and every read
    burst once more when the walk opens a row per burst (``timing.row_miss_gap``: a column
    walk). An ACT takes at least max(tRRD, tFAW / 4, bank cycle / banks) of the rank.
    """
    t = CONFIG.timing
    prog = compile_program(conversion(src, dst), CONFIG)
    per_act = max(t.trrd, t.tfaw / 4, (t.trp + t.tras) / CONFIG.banks)
    per_group = [0.0] * CONFIG.groups
    src_opens = (math.ceil(src.lw_per_group / prog.burst) if row_miss_gap(CONFIG, prog)
                 else math.ceil(src.lw_per_group / CONFIG.row_lw))
    for layout, first, opens in ((src, src_group, src_opens),
                                 (dst, dst_group, math.ceil(dst.lw_per_group / CONFIG.row_lw))):
        for g in range(first, first + layout.groups):
            per_group[g % CONFIG.groups] += opens * per_act
    return max(per_group)


def bounds(src: Layout, dst: Layout, src_group: int, dst_group: int) -> dict[str, int]:
    """Fewest cycles each resource allows (:data:`BOUND_TERMS`), refresh's share included.

    ``bus``: the busiest Group's data bus, one LW a cycle (:func:`busiest_bus_lw`);
    ``activates``: its ACTs (:func:`activate_lw`); ``buffer``: each engine's buffer read
    ports give its gather one destination LW a cycle, so the busiest engine writes its part
    of the destination at that rate (all of it on one engine; a Group each when split).
    Every term is stretched by the refresh's dead share (``memctrl.bound.refresh_dead_cycles``
    every tREFI).
    """
    engines = compile_program(conversion(src, dst), CONFIG).engines
    dead = refresh_dead_cycles(CONFIG, Traffic("sequential", 8, 0.5))
    stretch = 1.0 / (1.0 - dead / CONFIG.timing.trefi)
    raw = {"bus": busiest_bus_lw(src, dst, src_group, dst_group),
           "activates": activate_lw(src, dst, src_group, dst_group),
           "buffer": dst.groups * dst.lw_per_group // engines}
    return {name: math.ceil(v * stretch) for name, v in raw.items()}


#: The resources :func:`bounds` counts, in print order.
BOUND_TERMS = ("bus", "activates", "buffer")
#: Goal for the 1 MiB conversions: RTL cycles within this factor of the bound, the model
#: within MODEL_TOLERANCE of the RTL.
GOAL = 1.15
MODEL_TOLERANCE = 0.05


def print_rows(rows: list[dict]) -> None:
    """The table (bound and its binding resource per row) and the goal line of the 1 MiB rows."""
    print(f"\n{'pair':<29}{'size':>9}{'read LW':>9}{'write LW':>9}{'RTL cyc':>9}"
          f"{'eff':>6}{'RTL/bus':>8}{'bound':>8}{'binds':>10}{'RTL/bnd':>8}{'ref':>4}"
          f"{'model cyc':>10}{'model/RTL':>10}{'share':>8}")
    for row in rows:
        src, dst = Layout.parse(row["src"], row["dtype"]), Layout.parse(row["dst"], row["dtype"])
        desc = conversion(src, dst)
        bases = {"src_group": row["src_base"][0], "dst_group": row["dst_base"][0]}
        # the model at the refreshes this run met (a short run meets one or none), and with
        # refresh's expected share (what the functional model charges)
        row["share"] = conversion_cycles(CONFIG, desc, **bases)
        row["modeled"] = conversion_cycles(CONFIG, desc, **bases,
                                           refreshes=row.get("refreshes"))
        cyc = row["busy_cycles"]
        eff = (row["beats_read"] + row["beats_written"]) / cyc
        row["bus_bound"] = busiest_bus_lw(src, dst, row["src_base"][0], row["dst_base"][0])
        row["bounds"] = bounds(src, dst, row["src_base"][0], row["dst_base"][0])
        row["binds"] = max(BOUND_TERMS, key=lambda k: row["bounds"][k])
        row["bound"] = row["bounds"][row["binds"]]
        print(f"{row['pair']:<29}{row['kib']:>6} KiB{row['beats_read']:>9}"
              f"{row['beats_written']:>9}{cyc:>9}{eff:>6.0%}{cyc / row['bus_bound']:>7.2f}x"
              f"{row['bound']:>8}{row['binds']:>10}{cyc / row['bound']:>7.2f}x"
              f"{row.get('refreshes', '?'):>4}{row['modeled']:>10}{row['modeled'] / cyc:>10.3f}"
              f"{row['share']:>8}")
    big = [r for r in rows if r["kib"] == 1024]
    if not big:
        return
    worst = max(big, key=lambda r: r["busy_cycles"] / r["bound"])
    off = max(big, key=lambda r: abs(r["modeled"] / r["busy_cycles"] - 1))
    met = [r for r in big if r["busy_cycles"] / r["bound"] <= GOAL
           and abs(r["modeled"] / r["busy_cycles"] - 1) <= MODEL_TOLERANCE]
    print(f"\nGoal: every 1 MiB pair within {GOAL:.2f}x of its bound, the model within "
          f"{MODEL_TOLERANCE:.0%} of the RTL: {len(met)} of {len(big)} pairs. Worst RTL/bound "
          f"{worst['busy_cycles'] / worst['bound']:.2f}x ({worst['pair']}, {worst['binds']} "
          f"binds); worst model/RTL {off['modeled'] / off['busy_cycles']:.3f} ({off['pair']})")
    every = max(rows, key=lambda r: abs(r["modeled"] / r["busy_cycles"] - 1))
    print(f"Every row: worst model/RTL {every['modeled'] / every['busy_cycles']:.3f} "
          f"({every['pair']} {every['kib']} KiB)")


def run(cases: list[dict], check: bool) -> list[dict]:
    from mncore_hdl.testing.runner import BUILD_ROOT, run_cocotb
    from mncore_hdl.top.system import export_memory_system

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        env = {"CONV_BENCH_CASES": json.dumps(cases), "CONV_BENCH_OUT": str(out),
               "CONV_MEM_PATH": BACKING_STORE["system"],
               "CONV_CONFIG": json.dumps(CONFIG.to_dict()),
               "CONV_BENCH_CHECK": "1" if check else "0"}
        verilog = export_memory_system(CONFIG, BUILD_ROOT / "verilog")
        run_cocotb(verilog, "mem_system", "tb_converter_bench", "measure",
                   seed=1, test_name=f"bench_converter_{'checked' if check else 'timed'}",
                   extra_env=env, waves=check)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-kib", type=int, default=1024)
    parser.add_argument("--pairs", default="",
                        help="comma-separated substrings: only the pairs whose name holds one "
                             "(default: all). Refresh falls at other points of a shorter run, "
                             "so a row's RTL cycles may move by one refresh stall")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES_KIB)),
                        help="comma-separated sizes in KiB (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--rtl-json", type=Path,
                        help="take the RTL rows from this --json file of an earlier run (the "
                             "bounds and the model are recomputed; no simulation)")
    parser.add_argument("--breakdown", action="store_true",
                        help="only where each Group's data-bus cycles go (Amaranth simulator; "
                             "slow: use small --sizes)")
    args = parser.parse_args()
    wanted = [w.strip() for w in args.pairs.split(",") if w.strip()]
    small, large = [], []
    for kib in sorted({int(k) for k in args.sizes.split(",") if k.strip()}):
        if kib > args.max_kib:
            continue
        for name, a, b, sb, db in pairs(kib):
            if wanted and not any(w in name for w in wanted):
                continue
            case = {"name": f"{name} {kib} KiB", "kib": kib, "pair": name, "src": str(a),
                    "dst": str(b), "dtype": a.dtype, "src_base": sb, "dst_base": db}
            (small if kib <= CHECK_KIB else large).append(case)
    for name, a, b, sb, db in extra_pairs():
        if any(w in name and "odd" in w for w in wanted):
            kib = math.ceil(a.nbytes / 1024)
            small.append({"name": name, "kib": kib, "pair": name, "src": str(a), "dst": str(b),
                          "dtype": a.dtype, "src_base": sb, "dst_base": db})
    if not small and not large:
        parser.error("no bench row matches --pairs and --max-kib")
    if args.breakdown:
        print_breakdown(small + large)
        return
    if args.rtl_json:
        measured = {r["name"]: r for r in json.loads(args.rtl_json.read_text())}
        missing = [c["name"] for c in small + large if c["name"] not in measured]
        if missing:
            parser.error(f"--rtl-json {args.rtl_json} has no row for {', '.join(missing)}")
        rows = [measured[c["name"]] for c in small + large]
    else:
        rows = (run(small, check=True) if small else []) + (run(large, check=False) if large
                                                             else [])
    print_rows(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
