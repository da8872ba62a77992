"""pytest launchers of the layout converter benches (converter + behavioural memories, Icarus)."""

from __future__ import annotations

import json

import pytest
from mncore_hdl.arch import LW_BYTES, MNCORE2_SIM
from mncore_hdl.contracts.cosim import BACKING_STORE
from mncore_hdl.testing.runner import BUILD_ROOT, require_simulator, run_cocotb, test_seed

LATENCY = 12
#: The RTL config with a 256 KiB window per Group: every bench fits, and Icarus holds less.
WINDOW_LW = 1 << 15
CONFIG = MNCORE2_SIM.replace(sim_window_lw=WINDOW_LW,
                             dram_bytes_per_group=WINDOW_LW * LW_BYTES)


def harness_verilog(config=CONFIG, latency=LATENCY):
    """The converter harness as Verilog, cached by config and the sources it depends on."""
    from mncore_hdl.converter.harness import ConverterHarness
    from mncore_hdl.tooling.verilog import export_verilog

    meta = {"component": "ConverterHarness", "latency": latency, "config": config.to_dict()}
    return export_verilog(lambda: ConverterHarness(config, latency=latency),
                          "conv_harness", meta, BUILD_ROOT / "verilog", design=ConverterHarness)


@pytest.mark.parametrize("testcase,cases", [
    ("random_pairs", 10),
    ("identity", 0),
    ("with_host_traffic", 0),
    ("invalid_descriptor", 0),
    ("round_trips", 4),
])
def test_converter(testcase, cases):
    require_simulator()
    name = f"converter_{testcase}"
    seed = test_seed(name)
    env = {"CONV_SEED": str(seed), "CONV_CASES": str(cases),
           "CONV_MEM_PATH": BACKING_STORE["harness"], "CONV_CONFIG": json.dumps(CONFIG.to_dict())}
    run_cocotb(harness_verilog(), "conv_harness", "tb_converter", testcase, seed=seed,
               test_name=name, extra_env=env)
