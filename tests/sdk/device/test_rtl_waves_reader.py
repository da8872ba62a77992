"""The waves' declarations, save file and reader, on small wave files written here (no HDL
simulator): the command track, decoded fields, enum filters, windows and formats."""

from __future__ import annotations

import math
import re

import pytest
from mlsdk.device import commands
from mlsdk.device.rtl.waves import (
    Mark,
    parse_calls,
    pick_wave_format,
    vcd_variables,
    wave_variables,
    waves_calls,
    write_gtkw,
)
from mlsdk.waves import Span, Waves, format_summary
from mlsdk.waves.__main__ import main
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.converter import CONVERTER_STATE, ConverterState
from mncore_hdl.contracts.cosim import OBSERVATION, field_port, payload_fields
from mncore_hdl.contracts.memctrl import Cmd
from mncore_hdl.tooling.gtkw import ZOOM, filter_tables, zoom_for

# -- declarations ---------------------------------------------------------------------------


def test_command_kinds_are_the_device_commands():
    kinds = {cls.kind for cls in (commands.HostWrite, commands.HostRead, commands.Convert,
                                  commands.Launch, commands.Bind)}
    assert {k.name for k in tb.CommandKind} - {"NONE"} == kinds


def test_converter_state_is_the_control_machines_encoding():
    from mncore_hdl.converter.control import ConverterControl

    module = ConverterControl().elaborate(None)
    # Amaranth keeps a module's state machines by name; the encoding is its, not ours
    fsm = module._generated["control"]
    assert dict(fsm.encoding) == {s.name: int(s) for s in ConverterState}
    assert fsm.state.name == CONVERTER_STATE


def test_observation_port_is_the_controllers():
    from mncore_hdl.memctrl.controller import MemoryController

    members = MemoryController(MNCORE2_SIM, ports=3).signature.members
    assert all(name in members for name in OBSERVATION), [n for n in OBSERVATION
                                                          if n not in members]


def test_filters_name_every_enum_member():
    tables = filter_tables()
    assert tables["dram_cmd"] == {int(c): c.name for c in Cmd}
    assert tables["command"][int(tb.CommandKind.Launch)] == "Launch"
    assert tables["converter_state"][2] == "RUN"
    assert tables["converter_reg"][0x1B] == "BUSY_CYCLES"
    assert tables["mc_csr"][0x14] == "compute.read_beats"


# -- options --------------------------------------------------------------------------------


def test_calls_window_parses_and_refuses():
    assert parse_calls("2-3") == {2, 3} and parse_calls("1, 4-5") == {1, 4, 5}
    for bad in ("", "0", "3-2", "a", "2-x"):
        with pytest.raises(ValueError, match=r"calls like 2, 2-3 or 1,4-5.*not"):
            parse_calls(bad)


def test_calls_window_from_the_environment(monkeypatch):
    monkeypatch.setenv("MNCORE_WAVES_CALLS", "2")
    assert waves_calls(None) == {2} and waves_calls("3") == {3}
    monkeypatch.setenv("MNCORE_WAVES_CALLS", "two")
    with pytest.raises(ValueError, match=r"\$MNCORE_WAVES_CALLS must be calls"):
        waves_calls(None)


def test_wave_format_defaults_and_refusals(monkeypatch):
    monkeypatch.delenv("MNCORE_WAVES_FORMAT", raising=False)
    assert pick_wave_format(None, "icarus") == "fst"
    assert pick_wave_format(None, "rtl") == "vcd"
    assert pick_wave_format("vcd", "icarus") == "vcd"
    with pytest.raises(ValueError, match=r"must be one of \['vcd'\] on rtl, not 'fst'"):
        pick_wave_format("fst", "rtl")
    monkeypatch.setenv("MNCORE_WAVES_FORMAT", "lxt")
    with pytest.raises(ValueError, match=r"\$MNCORE_WAVES_FORMAT must be one of"):
        pick_wave_format(None, "icarus")


# -- a small co-simulation wave file --------------------------------------------------------

CONFIG = MNCORE2_SIM


def _write_vcd(path):
    """A cosim_tb-shaped VCD: two commands (a HostWrite of 3 beats on Group 1's host port,
    then a Convert whose converter runs 4 cycles), 20 cycles of a period of 2."""
    from vcd import VCDWriter

    top = "cosim_tb"
    with open(path, "w") as f, VCDWriter(f, timescale="1 ns") as w:
        sig = {}

        def var(scope, name, width):
            sig[name] = w.register_var(scope, name, "wire", size=width, init=0)

        for name, width in (("clk", 1), ("busy", 1), ("busy_cycles", 32),
                            (tb.MARK_KIND, 3), (tb.MARK_CALL, 16), (tb.MARK_BUFFER, 32),
                            (tb.MARK_SEQ, 32), (tb.WAVES_OFF, 1),
                            ("host__1__wdata__valid_m", 1), ("host__1__wdata__ready", 1),
                            ("host__1__rdata__valid", 1), ("host__1__rdata__ready_m", 1)):
            var(top, name, width)
        for fname, width in payload_fields(CONFIG)["wdata"].items():
            var(top, field_port("host", 1, "wdata", fname), width)
        var(f"{top}.dut.system.conv.control", CONVERTER_STATE, 2)
        var(f"{top}.dut.system.mc0", "cmd_kind", 3)
        marks = {1: (tb.CommandKind.HostWrite, 1, 7, 1), 21: (tb.CommandKind.Convert, 2, 8, 2)}
        for t in range(41):
            if t in marks:
                kind, call, buffer, seq = marks[t]
                for name, value in ((tb.MARK_KIND, int(kind)), (tb.MARK_CALL, call),
                                    (tb.MARK_BUFFER, buffer), (tb.MARK_SEQ, seq)):
                    w.change(sig[name], t, value)
            w.change(sig["clk"], t, 1 if t % 2 == 0 else 0)
            # beats: valid and ready high from t=3 to t=8 -> sampled by edges 4, 6, 8
            w.change(sig["host__1__wdata__valid_m"], t, int(3 <= t < 9))
            w.change(sig["host__1__wdata__ready"], t, int(3 <= t < 9))
            # the converter runs from t=24 to t=32 -> RUN sampled by edges 26, 28, 30, 32
            running = 24 <= t < 32
            w.change(sig[CONVERTER_STATE], t, int(ConverterState.RUN) if running else 0)
            w.change(sig["busy"], t, int(22 <= t < 32))
    return path


def test_reader_finds_the_commands_cycles_beats_and_busy(tmp_path):
    waves = Waves(_write_vcd(tmp_path / "s.vcd"))
    cmds = waves.commands()
    assert [(c.seq, c.kind, c.call, c.buffer) for c in cmds] == [
        (1, "HostWrite", 1, 7), (2, "Convert", 2, 8)]
    assert cmds[0].span == Span(1, 21) and cmds[1].span.start == 21
    assert waves.cycles(cmds[0].span) == 10
    assert waves.beats("host", 1, cmds[0].span) == 3
    assert waves.port_beats(cmds[1].span)["host"] == [0, 0, 0, 0]
    assert waves.converter_busy_cycles(waves.call(2)) == 4
    assert waves.converter_busy_cycles(waves.call(1)) == 0
    assert waves.converter_busy(waves.call(2)) and not waves.converter_busy(waves.call(1))
    assert waves.between(1, 2) == Span(1, waves.end)
    with pytest.raises(KeyError, match=r"no command of call 3; it has calls \[1, 2\]"):
        waves.call(3)


def test_summary_and_its_command_line(tmp_path, capsys):
    path = _write_vcd(tmp_path / "s.vcd")
    text = format_summary(Waves(path))
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["seq", "call", "command", "buffer", "start_ns", "cycles"]
    assert re.match(r"1\s+1\s+HostWrite\s+buf#7\s+1\s+10\s+3 \(G1\)\s+-\s+0$", lines[1]), text
    assert lines[-1].endswith("converter busy 4 cycles")
    assert main([str(path)]) == 0 and "HostWrite" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.fst")]) == 1
    assert "missing.fst" in capsys.readouterr().err


def test_save_file_decodes_fields_filters_enums_and_marks_commands(tmp_path):
    path = _write_vcd(tmp_path / "s.vcd")
    marks = [Mark(1, 1, "HostWrite", 1, 7, True), Mark(21, 2, "Convert", 2, 8, True),
             Mark(None, 3, "HostRead", 2, 8, False)]
    text = write_gtkw(path, marks).read_text()
    declared = {f"{s}.{n}" for s, n, _ in wave_variables(path)}
    traces = [re.sub(r"\[\d+:\d+\]$", "", line) for line in text.splitlines()
              if line and line[0] not in "[*@-^"]
    assert traces[0] == "cosim_tb.mark_kind" and not set(traces) - declared
    assert "cosim_tb.host__1__wdata__data" in traces
    assert "cosim_tb.host__1__wdata__valid_m" in traces  # what the design sees
    zoom = next(line for line in text.splitlines() if line.startswith("*"))
    assert zoom.split()[2:5] == ["1", "21", "-1"]  # markers a, b at the recorded commands
    # this file counts nanoseconds: zoomed to show the span a picosecond dump's ZOOM shows
    assert float(zoom.split()[0][1:]) == pytest.approx(zoom_for(1e-9))
    filters = tmp_path / "s.filters"
    assert (filters / "dram_cmd.txt").read_text().splitlines()[1] == "1 ACT"
    assert f"^1 {filters.resolve() / 'command.txt'}" in text


def test_the_zoom_follows_the_dump_time_unit():
    assert zoom_for(1e-12) == ZOOM
    # GTKWave's zoom is log2 of the units a pixel spans: a unit 1000x coarser, 10 steps nearer
    assert zoom_for(1e-9) == pytest.approx(ZOOM + math.log2(1000))
    with pytest.raises(ValueError, match="Time unit must be a positive number of seconds, not 0"):
        zoom_for(0)


def test_a_broken_fst_is_reported(tmp_path):
    from mlsdk.device.rtl.waves import wave_problem

    fst = tmp_path / "cut.fst"
    fst.write_bytes(b"\x00\x01not an fst")
    assert "cannot be read as FST" in wave_problem(fst)
    with pytest.raises(ValueError, match="not a readable FST or VCD file"):
        Waves(fst)


def _marking_device(calls):
    """An RTL device whose requests are recorded, not sent (the command track's numbering)."""
    from cosim_fakes import FakeDevice

    class Recording(FakeDevice):
        def _request(self, msg, lw=0):
            self.sent.append(msg)
            return {"marked": True, "time": 10 * len(self.sent)}

    device = Recording(MNCORE2_SIM, "fake", waves="unused", calls=calls)
    device.sent = []
    return device


def test_marks_number_calls_by_launch_and_pause_outside_the_window():
    from mlsdk.device.commands import Bind, Buffer, HostRead, Launch

    device = _marking_device("2")
    a, b = Buffer(1, 0, 1, 0, 8), Buffer(2, 0, 1, 8, 8)
    stream = [Bind("f", "x", a), Launch("f", {"x": a}, {"y": b}), HostRead(b),
              Bind("g", "x", b), Launch("g", {"x": b}, {}), HostRead(a)]
    for command in stream:
        device._mark(command)
    assert [(m.kind, m.call, m.buffer, m.recorded) for m in device.marks] == [
        ("Bind", 1, 1, False), ("Launch", 1, 2, False), ("HostRead", 1, 2, False),
        ("Bind", 2, 2, True), ("Launch", 2, None, True), ("HostRead", 2, 1, True)]
    sent = device.sent
    assert [m["number"] for m in sent] == [1, 2, 3, 4, 5, 6]
    assert [m["waves_off"] for m in sent] == [1, 1, 1, 0, 0, 0]
    assert sent[4]["buffer"] == tb.NO_BUFFER and sent[1]["kind"] == int(tb.CommandKind.Launch)
    device.close()


def test_a_dump_without_the_testbench_clock_has_no_cycles(tmp_path):
    from vcd import VCDWriter

    path = tmp_path / "top.vcd"
    with open(path, "w") as f, VCDWriter(f, timescale="1 ns") as w:
        busy = w.register_var("bench.top", "busy", "wire", size=1, init=0)
        w.register_var("bench.top", "busy_cycles", "wire", size=32, init=0)
        w.change(busy, 5, 1)
    waves = Waves(path)
    assert waves.cycles() == 0 and not waves.has(tb.MARK_SEQ)
    times, values = waves.changes("busy")
    assert list(times) == [0, 5] and values == [0, 1]


VCD = """$timescale 1ps $end
$scope module cosim_top $end
$var wire 1 ! busy $end
$var wire 32 " busy_cycles $end
$var wire 1 # host__0__req__valid $end
$var wire 28 $ compute__1__req__payload $end
$var wire 1 % desc_we $end
$scope module system $end
$var wire 1 & busy $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0!
"""


def test_gtkw_groups_the_top_ports(tmp_path):
    vcd = tmp_path / "s.vcd"
    vcd.write_text(VCD)
    assert ("cosim_top.system", "busy", 1) in vcd_variables(vcd)
    text = write_gtkw(vcd).read_text()
    for group in ("host ports", "compute ports", "layout converter", "counters",
                  "input descriptors"):
        assert group in text
    assert "cosim_top.compute__1__req__payload[27:0]" in text
    assert "cosim_top.busy" in text and "system.busy" not in text
