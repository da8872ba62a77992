"""Host transfers as one round trip: the same cycles as the driver's beat-by-beat path.

On the cocotb simulators the driver moves a HostWrite, a HostRead or a Launch's loads and stores
through the testbench's DMA engines (``mncore_hdl.top.cosim_tb``) in one round trip; the Amaranth
simulator runs the beat-by-beat loop in Python. The engines implement that loop in hardware, so
every command must measure the same cycles, leave the same DRAM and the same counters:

- on Icarus, with the engines and without them (``MNCORE_COSIM_DMA=0``: the beat path);
- on each cocotb simulator (Icarus, Verilator when installed) against the Amaranth simulator.
"""

from __future__ import annotations

import pytest
from mlsdk.testing.flows import FLOWS, require_device, run_flow
from mncore_hdl.paths import repo_root

FLOW = FLOWS["chain3"]  # host writes, three launches (compute loads/stores), two conversions


def _measured(run) -> list[tuple[str, int]]:
    return [(c.command, c.cycles) for r in run.report for c in r.commands]


def _same(a, b, what: str) -> None:
    assert _measured(a) == _measured(b), f"{what}: per-command cycles differ"
    assert a.commands == b.commands
    assert (a.result == b.result).all()
    differ = {k: (a.counters[k], b.counters.get(k)) for k in a.counters
              if a.counters[k] != b.counters.get(k)}
    assert not differ, f"{what}: counters differ: {differ}"
    assert len(a.snapshot) == len(b.snapshot)
    for g, (pa, pb) in enumerate(zip(a.snapshot, b.snapshot, strict=True)):
        assert set(pa) == set(pb), f"{what}: Group {g} holds different pages"
        assert all((pa[p] == pb[p]).all() for p in pa), f"{what}: Group {g} DRAM differs"


def test_dma_and_beat_paths_measure_identical_cycles(tmp_path, monkeypatch):
    require_device("mncore2:icarus")
    dma = run_flow(FLOW, "mncore2:icarus", False, tmp_path / "dma")
    monkeypatch.setenv("MNCORE_COSIM_DMA", "0")
    beats = run_flow(FLOW, "mncore2:icarus", False, tmp_path / "beats")
    _same(dma, beats, "Icarus DMA vs beat-by-beat")


@pytest.mark.parametrize("device", ["mncore2:icarus", "mncore2:verilator"])
def test_every_simulator_measures_the_amaranth_cycles(device, tmp_path):
    require_device(device)
    run = run_flow(FLOW, device, False, tmp_path / "cocotb")
    amaranth = run_flow(FLOW, "mncore2:rtl", False, tmp_path / "amaranth")
    # The absolute reads of the free-running `cycle` may differ by one (see
    # test_cosim_equivalence); everything measured as a duration must not.
    amaranth.counters = {k: v for k, v in amaranth.counters.items()
                         if k != "cycle" and not k.endswith(".cycles")}
    run.counters = {k: v for k, v in run.counters.items() if k in amaranth.counters}
    _same(run, amaranth, f"{device} vs mncore2:rtl")


def test_kernel_bench_moves_the_data_with_no_cocotb(tmp_path):
    """``bench/icarus_kernel.py`` (the bound the Icarus transfer speed is measured against)
    writes and reads back every Group through the DMA engines with only Icarus running."""
    import shutil
    import sys

    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not on PATH")
    sys.path.insert(0, str(repo_root() / "bench"))
    try:
        from icarus_kernel import kernel_transfer_speed
    finally:
        sys.path.pop(0)
    rows = kernel_transfer_speed(16 << 10, keep=tmp_path)  # raises if the data differ
    assert [what for what, _, _ in rows] == ["16 KiB HostWrite (kernel)",
                                           "16 KiB HostRead (kernel)"]
    lw = (16 << 10) // 8 // 4
    assert all(lw <= cycles < 2 * lw and wall > 0 for _, cycles, wall in rows)
