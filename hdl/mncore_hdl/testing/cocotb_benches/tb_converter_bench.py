"""cocotb bench measuring conversions on the memory-system top (driven by bench/bench_converter.py).

``CONV_BENCH_CASES`` holds a JSON list of ``{"src", "dst", "dtype", "src_base", "dst_base"}``;
the measured cycles and counters go to the JSON file ``CONV_BENCH_OUT``.
"""

from __future__ import annotations

import json

import cocotb

from mncore_hdl.layout import Layout, conversion
from mncore_hdl.settings import HDL

from .converter_agents import TB, random_tensor


@cocotb.test()
async def measure(dut):
    tb = TB(dut)
    await tb.reset()
    check = HDL["CONV_BENCH_CHECK"].get()
    results = []
    for case in json.loads(HDL["CONV_BENCH_CASES"].required()):
        a = Layout.parse(case["src"], case["dtype"])
        b = Layout.parse(case["dst"], case["dtype"])
        desc = conversion(a, b)
        tensor = random_tensor(tb.rng, a.shape, a.dtype)
        if check:
            _, stats = await tb.convert(a, b, desc, tensor, tuple(case["src_base"]),
                                        tuple(case["dst_base"]), label=case["name"])
        else:
            from mncore_hdl.converter import compile_program, registers
            prog = compile_program(desc, tb.config)
            stats = await tb.run(registers(prog, *case["src_base"], *case["dst_base"]))
        results.append({**case, **stats})
        dut._log.info(f"{case['name']}: {stats}")
    with open(HDL["CONV_BENCH_OUT"].required(), "w") as f:
        json.dump(results, f, indent=1)
    assert tb.errors == 0, f"{tb.errors} conversions differ from the golden model"
