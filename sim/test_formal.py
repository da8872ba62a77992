"""Formal proofs (SymbiYosys): the memory controller's timing rules and streams, the walker.

Each proof runs on the small configs of :mod:`mncore_hdl.formal` (``PROOF_CONFIG``); the
mutant tests break one rule in the design and expect a counterexample with its VCD.
"""

import dataclasses

import pytest
from mncore_hdl.formal.memctrl import PROOF_CONFIG, PROOF_TIMING, ControllerProof
from mncore_hdl.formal.runner import prove, tools_available

#: BMC depth of the controller proofs: the longest rule window of PROOF_TIMING (tFAW 5,
#: tRAS 4) and a refresh (tREFI 10 + tRFC 3) fit inside it with margin.
CONTROLLER_DEPTH = 15


@pytest.fixture(autouse=True)
def _need_tools():
    missing = tools_available()
    if missing:
        pytest.skip(missing)


def _explain(result):
    return f"{result.status}: {result.failures} (trace {result.vcd}, run in {result.workdir})"


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_controller_keeps_every_timing_rule(tmp_path, scheduler):
    config = PROOF_CONFIG.replace(scheduler=scheduler, scheduler_window=4)
    result = prove(ControllerProof(config), tmp_path, depth=CONTROLLER_DEPTH, timeout=240)
    assert result.passed, _explain(result)


def test_mutant_trcd_one_short_is_caught(tmp_path):
    timing = dataclasses.replace(PROOF_TIMING, trcd=PROOF_TIMING.trcd - 1)
    mutant = ControllerProof(PROOF_CONFIG.replace(timing=timing), rules=PROOF_CONFIG)
    result = prove(mutant, tmp_path, depth=CONTROLLER_DEPTH, timeout=240)
    assert result.status == "FAIL", _explain(result)
    assert result.vcd is not None and result.vcd.exists()
    assert any("properties.py" in f for f in result.failures), result.failures
