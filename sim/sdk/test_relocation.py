"""The proof: with io_spec_constraints a hand-off is a relocation the RTL converter never sees.

For each flow of ``mlsdk.testing.flows.FLOWS`` (the seed's 32x64 fp32 producer/consumer, an odd
33x65 shape, a 3-D tensor, fp16, a chain of three functions), on the RTL (Icarus, Verilator
when it is installed, and the Amaranth simulator for the seed flow):

- constrained: every hand-off is a Bind to the producer's buffer, the converter's beat counters
  stay 0, its ``busy`` never rises in the VCD, the host port's CSR counters do not move between
  the calls, and the result equals torch;
- unconstrained: the converter runs, its beat counters equal the tensor's LWs read and written
  (``src.nbytes + dst.nbytes`` bytes), ``busy`` rises, and the result is the same;
- differential: the same command stream on the functional model leaves identical DRAM, and
  modeled cycles are within 10% of the measured ones.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from mlsdk.testing.flows import FLOWS, require_device, run_flow, top_signal_changes
from mlsdk.testing.seeds import SHARED, SUCCESS, extract_sample_program, seed_documents
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.paths import repo_root

ROOT = repo_root()
TOLERANCE = 0.10


def _close(result: torch.Tensor, expected: torch.Tensor) -> bool:
    return result.dtype == expected.dtype and torch.allclose(result.float(), expected.float())


def _cases():
    for flow in FLOWS:
        yield pytest.param(flow, "mncore2:icarus", id=f"{flow}-icarus")
    for flow in FLOWS:  # skipped, with the reason, where Verilator is not installed
        yield pytest.param(flow, "mncore2:verilator", id=f"{flow}-verilator")
    yield pytest.param("seed", "mncore2:rtl", id="seed-amaranth")


def _compare_cycles(rtl_run, model_run) -> list[str]:
    """Modeled vs measured cycles: the session's total within the tolerance, and each command
    within it plus tRCD (the stream model assumes closed banks; the RTL often finds the row
    open, e.g. a 128 LW HostRead: modeled 164, measured 143)."""
    bad = []
    slack = MNCORE2_SIM.timing.trcd
    total_m = total_r = 0
    for rec_m, rec_r in zip(model_run.report, rtl_run.report, strict=True):
        for cm, cr in zip(rec_m.commands, rec_r.commands, strict=True):
            if cr.cycles < 50:  # Bind: one register write on both
                continue
            total_m += cm.cycles
            total_r += cr.cycles
            err = (cm.cycles - cr.cycles) / cr.cycles
            print(f"  {cr.command[:60]:60s} modeled {cm.cycles:6d} measured {cr.cycles:6d} "
                  f"({err:+.1%})")
            if abs(cm.cycles - cr.cycles) > TOLERANCE * cr.cycles + slack:
                bad.append(f"{cr.command}: modeled {cm.cycles}, measured {cr.cycles}")
    print(f"  total: modeled {total_m}, measured {total_r}")
    if abs(total_m - total_r) > TOLERANCE * total_r:
        bad.append(f"session total: modeled {total_m}, measured {total_r}")
    return bad


@pytest.mark.parametrize("flow_name,device", list(_cases()))
def test_relocation_skips_the_converter(flow_name, device, tmp_path):
    require_device(device)
    flow = FLOWS[flow_name]
    run = run_flow(flow, f"{device}?waves={tmp_path}", True, tmp_path / "cg")
    assert _close(run.result, run.expected), f"{flow}: result differs from torch"
    assert all(run.relocated), f"hand-offs not relocated: {run.relocated}"
    assert not any(c.startswith("Convert") for c in run.commands), run.commands
    for rec in run.report.calls():
        assert rec.bytes["converter"] == 0 and rec.cycles_kind == "measured"
    assert run.counters["converter.beats_read"] == 0
    assert run.counters["converter.beats_written"] == 0
    assert all(run.counters[f"mc{g}.converter.{k}_beats"] == 0
               for g in range(MNCORE2_SIM.groups) for k in ("read", "write"))
    for before, after in run.host_beats_between:
        assert before == after, f"host port moved {after - before} beats between the calls"
    busy = top_signal_changes(run.vcd, "busy")
    assert not any(v for _, v in busy), f"converter busy rose in {run.vcd}: {busy[:4]}"
    assert run.vcd.with_suffix(".gtkw").exists()

    model = run_flow(flow, "mncore2:auto", True, tmp_path / "cgm")
    assert model.commands == run.commands, "the two devices ran different command streams"
    assert _same_dram(model.snapshot, run.snapshot), "DRAM differs from the functional model"
    bad = _compare_cycles(run, model)
    assert not bad, f"modeled cycles off by more than {TOLERANCE:.0%}: {bad}"


@pytest.mark.parametrize("flow_name,device", list(_cases()))
def test_conversion_without_constraints(flow_name, device, tmp_path):
    require_device(device)
    flow = FLOWS[flow_name]
    run = run_flow(flow, f"{device}?waves={tmp_path}", False, tmp_path / "cg")
    assert _close(run.result, run.expected), f"{flow}: result differs from torch"
    converts = [c for r in run.report.calls() for c in r.commands
                if c.command.startswith("Convert")]
    assert len(converts) == flow.stages - 1
    last = run.report.calls()[-1]
    assert last.conversions == 1 and last.relocations == 0
    nbytes = last.bytes["converter"]
    counters = run.counters
    # The last conversion's counters (cleared by each start) vs the buffers' bytes.
    beats = counters["converter.beats_read"] + counters["converter.beats_written"]
    assert beats * 8 == run.handoff_bytes[-1] == nbytes > 0, (beats, run.handoff_bytes)
    busy = top_signal_changes(run.vcd, "busy")
    assert sum(1 for _, v in busy if v) == flow.stages - 1, f"busy edges: {busy}"

    model = run_flow(flow, "mncore2:auto", False, tmp_path / "cgm")
    assert model.commands == run.commands
    assert [r.bytes for r in model.report] == [r.bytes for r in run.report]
    assert _same_dram(model.snapshot, run.snapshot), "DRAM differs from the functional model"
    bad = _compare_cycles(run, model)
    assert not bad, f"modeled cycles off by more than {TOLERANCE:.0%}: {bad}"


def _same_dram(a, b) -> bool:
    if len(a) != len(b):
        return False
    for pa, pb in zip(a, b, strict=True):
        if set(pa) != set(pb) or any(not (pa[p] == pb[p]).all() for p in pa):
            return False
    return True


@pytest.mark.parametrize("device", ["mncore2:rtl", "mncore2:icarus", "mncore2:verilator"])
def test_seed_program_unmodified(device, tmp_path):
    require_device(device)
    seeds = seed_documents()
    if not seeds:
        pytest.skip(f"no seed program under {SHARED / 'seeds'} (set MNCORE_SHARED_DIR)")
    program = tmp_path / "io_spec_constraints.py"
    program.write_text(extract_sample_program(seeds[0].read_text()))
    # This checkout's packages, whatever the environment's editable install points at.
    roots = [str(ROOT / d) for d in ("sdk", "compiler", "hdl")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*roots, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(program), "--device", device], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == SUCCESS
