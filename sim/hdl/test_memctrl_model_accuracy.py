"""The analytic timing models against the RTL: within 5% on the bench's patterns and a hand-off.

Runs the traffic of ``bench/bench_memctrl.py`` (its cases, generators and model column) on
Icarus under each scheduler: sequential reads, writes and copies, and random 8-beat bursts
(read or write, reads only, two reads then a write), on 1 and 3 ports, at the bench's 4096 LW a
port. Shorter runs are not fit for a 5% check: the model counts refresh on average (a
2048-LW stream of one port sees none, +4-5%), and fewer random bursts drift by up to 8% with
the length. About two minutes a scheduler. Then the seed flow's hand-off conversion
(``mlsdk.testing.flows``, no constraints) on Icarus against ``mncore2:auto``'s modeled cycles.
"""

from __future__ import annotations

import pytest
from mlsdk.testing.flows import FLOWS, require_device, run_flow
from mncore_hdl.testing import memctrl_bench as bench
from mncore_hdl.testing.runner import require_icarus

TOLERANCE = 0.05
LW = 4096


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_model_within_5_percent_of_rtl(scheduler):
    require_icarus()
    config = bench.CONFIG if scheduler == "in_order" else bench.FR_FCFS
    cases = [bench.make_case(config, tr, p, LW)
             for tr in bench.TRAFFIC for p in bench.PORT_COUNTS]
    measured = {r["name"]: r["cycles"]
                for r in bench.run_icarus(bench.build(config), cases, False,
                                          f"_accuracy_{scheduler}")}
    bad = []
    for tr in bench.TRAFFIC:
        for p in bench.PORT_COUNTS:
            name = f"{tr}/{p}"
            model = bench.modeled(config, tr, LW * p, p)
            rtl = measured[name]
            err = (model - rtl) / rtl
            print(f"  {scheduler:8} {name:10} RTL {rtl:6d} model {model:6d} ({err:+.1%})")
            if abs(err) > TOLERANCE:
                bad.append(f"{name}: model {model}, RTL {rtl} ({err:+.1%})")
    assert not bad, f"{scheduler}: model off by more than {TOLERANCE:.0%}: {bad}"


def test_handoff_conversion_within_5_percent(tmp_path):
    """The seed flow without constraints: its conversion on Icarus vs ``mncore2:auto``'s model."""
    require_device("mncore2:icarus")
    flow = FLOWS["seed"]
    rtl = run_flow(flow, "mncore2:icarus", False, tmp_path / "cg")
    model = run_flow(flow, "mncore2:auto", False, tmp_path / "cgm")
    assert model.commands == rtl.commands, "the two devices ran different command streams"
    pairs = [(cm, cr) for rm, rr in zip(model.report, rtl.report, strict=True)
             for cm, cr in zip(rm.commands, rr.commands, strict=True)
             if cr.command.startswith("Convert")]
    assert pairs, f"{flow}: no conversion ran"
    bad = []
    for cm, cr in pairs:
        err = (cm.cycles - cr.cycles) / cr.cycles
        print(f"  {cr.command[:60]:60s} modeled {cm.cycles:6d} measured {cr.cycles:6d} "
              f"({err:+.1%})")
        if abs(err) > TOLERANCE:
            bad.append(f"{cr.command}: modeled {cm.cycles}, measured {cr.cycles} ({err:+.1%})")
    assert not bad, f"conversion cycles off by more than {TOLERANCE:.0%}: {bad}"
