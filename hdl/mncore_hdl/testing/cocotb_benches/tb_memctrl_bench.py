"""cocotb coroutine of the throughput bench: Python only at the start and end of each stream."""

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from mncore_hdl.settings import HDL

CLOCK_NS = 1.334


@cocotb.test()
async def run_cases(dut):
    """Run every case of ``$MC_BENCH_CASES`` (JSON) on the bench top; write ``$MC_BENCH_OUT``."""
    cases = json.loads(HDL["MC_BENCH_CASES"].required())
    Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()
    dut.start.value = 0
    dut.csr_addr.value = 0
    results = []
    for case in cases:
        dut.rst.value = 1   # a fresh controller per case: banks closed, refresh timer at 0
        await ClockCycles(dut.clk, 2)
        dut.rst.value = 0
        for i, gen in enumerate(case["gens"]):
            for name, value in gen.items():
                getattr(dut, f"gen{i}_{name}").value = value
        for i in range(len(case["gens"]), case["ports"]):
            getattr(dut, f"gen{i}_count").value = 0
        await RisingEdge(dut.clk)
        t0 = time.perf_counter()
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.done)
        wall = time.perf_counter() - t0
        results.append({"name": case["name"], "cycles": int(dut.cycles.value), "wall_s": wall})
    with open(HDL["MC_BENCH_OUT"].required(), "w") as f:
        json.dump(results, f, indent=1)
