"""pytest launchers of the converter benches on the memory-system top (real controllers, Icarus)."""

from __future__ import annotations

import json

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.cosim import BACKING_STORE
from mncore_hdl.testing.runner import BUILD_ROOT, require_simulator, run_cocotb, test_seed
from mncore_hdl.top.system import export_memory_system


def system_verilog(config=MNCORE2_SIM):
    """The memory-system top as Verilog, cached by sources under ``build/sim/verilog``."""
    return export_memory_system(config, BUILD_ROOT / "verilog")


@pytest.mark.parametrize("testcase,cases", [
    ("random_pairs", 6),
    ("with_host_traffic", 0),
    ("invalid_descriptor", 0),
    ("round_trips", 2),
])
def test_converter_system(testcase, cases):
    require_simulator()
    name = f"converter_system_{testcase}"
    seed = test_seed(name)
    env = {"CONV_SEED": str(seed), "CONV_CASES": str(cases),
           "CONV_MEM_PATH": BACKING_STORE["system"],
           "CONV_CONFIG": json.dumps(MNCORE2_SIM.to_dict())}
    run_cocotb(system_verilog(), "mem_system", "tb_converter", testcase, seed=seed,
               test_name=name, extra_env=env)
