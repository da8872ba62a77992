"""The seed flow's waves, read back from the wave file alone (``mlsdk.waves``), on Icarus and
Verilator.

- constrained (relocation): the converter is never busy in any call, and no command moves a
  beat through it; the hand-off call is a Bind, with no beat on the host ports;
- unconstrained (conversion): the conversion call keeps the converter running for exactly the
  cycles its ``busy_cycles`` counter reports, inside the Convert command's span;
- the default wave file (FST) is at most 1 MB on both simulators (Icarus repacks it as it
  closes; Verilator's writer packs with LZ4 only, 1.8 MB, and the session repacks it,
  ``repack_fst``), a window of one call smaller still, and every signal the ``.gtkw`` names is
  declared in the dump, with the command track at its top.
"""

from __future__ import annotations

import re

import pytest
from mlsdk.device.rtl.waves import wave_variables
from mlsdk.testing.flows import FLOWS, require_device, run_flow
from mlsdk.waves import Waves

DEVICES = ["mncore2:icarus", "mncore2:verilator"]
#: The bound on the seed flow's default wave file on either simulator (issue 28).
MAX_BYTES = 1 << 20


def _run(device: str, constrained: bool, folder, options: str = ""):
    require_device(device)
    run = run_flow(FLOWS["seed"], f"{device}?waves={folder}{options}", constrained,
                   folder / "cg")
    assert run.vcd is not None and run.vcd.exists(), "the session wrote no wave file"
    return run


def _gtkw_signals(gtkw) -> list[str]:
    """The signals a save file names (its trace lines, without their bit ranges)."""
    names = []
    for line in gtkw.read_text().splitlines():
        if line and line[0] not in "[*@-^#!" and not line.startswith(" "):
            names.append(re.sub(r"\[\d+:\d+\]$", "", line))
    return names


@pytest.mark.parametrize("device", DEVICES)
def test_relocation_leaves_the_converter_idle_in_the_waves(device, tmp_path):
    run = _run(device, True, tmp_path)
    waves = Waves(run.vcd)
    commands = waves.commands()
    assert [c.kind for c in commands] == [c.split()[0] for c in run.commands], commands
    assert not waves.converter_busy(), f"converter busy in {run.vcd}"
    assert waves.converter_busy_cycles() == 0
    hand_off = waves.call(2)
    assert waves.cycles(hand_off) > 0
    assert all(c.kind != "Convert" for c in commands)
    # the hand-off call reads its input where the producer left it: no host beat moves
    before_read = [c for c in commands if c.call == 2 and c.kind != "HostRead"]
    host = sum(sum(waves.port_beats(c.span)["host"]) for c in before_read)
    assert host == 0, f"host port moved {host} beats in call 2 before its read-back"
    assert run.vcd.suffix == ".fst" and run.vcd.stat().st_size <= MAX_BYTES, (
        run.vcd, run.vcd.stat().st_size)


@pytest.mark.parametrize("device", DEVICES)
def test_conversion_keeps_the_converter_busy_for_its_counted_cycles(device, tmp_path,
                                                                   monkeypatch):
    run = _run(device, False, tmp_path)
    waves = Waves(run.vcd)
    counted = run.counters["converter.busy_cycles"]
    converts = [c for c in waves.commands() if c.kind == "Convert"]
    assert len(converts) == 1 and converts[0].call == 2, waves.commands()
    assert waves.converter_busy_cycles(waves.call(2)) == counted > 0
    assert waves.converter_busy_cycles(converts[0].span) == counted
    assert waves.converter_busy_cycles(waves.call(1)) == 0
    beats = run.counters["converter.beats_read"] + run.counters["converter.beats_written"]
    assert beats > 0
    size = run.vcd.stat().st_size
    print(f"{device}: {run.vcd.name} {size} bytes, converter busy {counted} cycles")
    assert size <= MAX_BYTES, f"{run.vcd}: {size} bytes, more than {MAX_BYTES}"

    gtkw = run.vcd.with_suffix(".gtkw")
    declared = {f"{scope}.{name}" for scope, name, _ in wave_variables(run.vcd)}
    named = _gtkw_signals(gtkw)
    assert named and not set(named) - declared, set(named) - declared
    assert named[0].endswith(".mark_kind"), named[:3]
    assert any(n.endswith("host__1__wdata__data") for n in named)
    assert any(n.endswith(".cmd_kind") for n in named)

    monkeypatch.setenv("MNCORE_WAVES_CALLS", "2")  # a window: only the conversion call
    windowed = _run(device, False, tmp_path / "window")
    only = Waves(windowed.vcd)
    assert {c.call for c in only.commands()} == {2}, only.commands()
    assert only.converter_busy_cycles() == counted
    print(f"{device}: the window of call 2: {windowed.vcd.stat().st_size} bytes")
    assert windowed.vcd.stat().st_size < size, (windowed.vcd.stat().st_size, size)

