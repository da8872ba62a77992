"""pytest launchers of the converter benches on the memory-system top (real controllers, Icarus)."""

from __future__ import annotations

import json

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.cosim import BACKING_STORE
from runner_util import BUILD_ROOT, require_simulator, run_cocotb, test_seed


def system_verilog(config=MNCORE2_SIM):
    """The memory-system top as Verilog (about 15 s on a cache miss), cached by sources."""
    from mncore_hdl.system import MemorySystem
    from mncore_hdl.verilog import export_verilog

    meta = {"component": "MemorySystem", "config": config.to_dict()}
    return export_verilog(lambda: MemorySystem(config), "mem_system", meta,
                          BUILD_ROOT / "verilog", design=MemorySystem)


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
