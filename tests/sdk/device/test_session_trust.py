"""The simulator connection, answers and run folders trust nothing they did not check.

A fake server (``fake_cosim_server.py``) stands in for the cocotb server behind the real
:class:`~mlsdk.device.rtl.cocotb_session.CocotbSession`: an intruder that reaches the session's
socket before the simulator gets nothing and changes nothing; a malformed or oversized answer loses
the session with a DeviceError, and the next call refuses; run folders are private and removed
when a session ends well.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest
from cosim_fakes import FakeDevice, FakeSession, echo
from mlsdk.device.commands import Buffer
from mlsdk.device.rtl import cocotb_session, runfolder
from mlsdk.device.rtl.runfolder import KEEP_RUNS_ENV
from mlsdk.errors import DeviceError
from mncore_hdl.arch import MNCORE2_SIM


@pytest.fixture
def runs(monkeypatch, tmp_path) -> Path:
    """Sessions' run folders go under ``tmp_path/runs``."""
    monkeypatch.setattr(runfolder, "COSIM_ROOT", tmp_path)
    monkeypatch.delenv(KEEP_RUNS_ENV, raising=False)
    return tmp_path / "runs"


def wait_for(path: Path, key: str, seconds: float = 30.0) -> dict:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists():
            report = json.loads(path.read_text())
            if report.get(key):
                return report
        time.sleep(0.05)
    raise AssertionError(f"{path} never reported {key!r}")


@pytest.mark.parametrize("mode", ["hijack-stranger", "hijack-group"])
def test_an_intruder_that_connects_first_gets_nothing(runs, monkeypatch, tmp_path, mode):
    """stranger: another process group (refused by SO_PEERCRED); group: the simulator's own
    group but without the secret (refused by the secret)."""
    report = tmp_path / "intruder.json"
    monkeypatch.setenv("FAKE_COSIM_MODE", mode)
    monkeypatch.setenv("FAKE_COSIM_REPORT", str(report))
    session = FakeSession(MNCORE2_SIM)
    try:
        assert session.request(echo(7), 5.0) == {"value": 7, "seq": 1}
        got = wait_for(report, "done")
        assert got["received"] == ""  # not the ready line, not the request, not its data
        assert session.request(echo(8), 5.0) == {"value": 8, "seq": 2}
        assert not (session.test_dir / "cosim.sock").exists()  # closed once connected
    finally:
        session.close(timeout=5.0)


def test_the_secret_never_reaches_argv(runs):
    session = FakeSession(MNCORE2_SIM)
    try:
        cmdline = Path(f"/proc/{session.proc.pid}/cmdline")
        if not cmdline.exists():
            pytest.skip("no /proc on this OS")
        assert b"MNCORE_COSIM_TOKEN" not in cmdline.read_bytes()
        assert session.request(echo(1), 5.0)["value"] == 1
    finally:
        session.close(timeout=5.0)


MALFORMED = {
    "not JSON": "not json",
    "not an object": "[1, 2]",
    "nested too deeply": "[" * 100_000,
    "bad progress": '{"progress": "soon", "seq": SEQ}',
    "error not a message": '{"error": {"x": 1}, "seq": SEQ}',
    "answer not a dict after seq": '{"seq": SEQ, "cycles": -1}',
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_loses_the_session_with_a_device_error(runs, raw):
    device = FakeDevice(MNCORE2_SIM, "fake")
    try:
        with pytest.raises(DeviceError, match="lost the Fake simulator") as first:
            device._request({"op": "read" if "cycles" in raw else "echo", "raw": raw,
                             "buffer": {"groups": 1, "lw_per_group": 1}})
        assert "run folder kept" in str(first.value)
        with pytest.raises(DeviceError, match="lost the Fake simulator"):
            device._request(echo(2))  # refused: the session is gone
    finally:
        device.close()


def test_an_answer_without_its_fields_is_a_device_error(runs):
    """The fake answers ``{"value": ...}`` to anything: a peek's answer has no data."""
    device = FakeDevice(MNCORE2_SIM, "fake")
    try:
        with pytest.raises(DeviceError, match="has no 'data'"):
            device.peek(Buffer(1, 0, 1, 0, 4))
        with pytest.raises(DeviceError, match="lost"):
            device.counters()
    finally:
        device.close()


def test_words_of_the_wrong_length_are_refused(runs):
    device = FakeDevice(MNCORE2_SIM, "fake")
    try:
        session = device._start()
        short = '{"data": "AAAAAAAAAAA=", "seq": SEQ}'  # 8 bytes, one LW: four were asked
        answer = session.request({"op": "peek", "count": 4, "raw": short}, 5.0)
        assert answer["fatal"] and "base64 of 4 64-bit words" in answer["error"]
    finally:
        device.close()


def test_an_oversized_answer_is_refused_and_the_buffer_stays_bounded(runs):
    device = FakeDevice(MNCORE2_SIM, "fake")
    try:
        session = device._start()
        session.channel.limit = 4096
        with pytest.raises(DeviceError, match="more than 4096 bytes"):
            device._request({"op": "echo", "raw": "x" * 100_000})
        assert session.channel.buffered <= 4096 + (1 << 20)
        with pytest.raises(DeviceError, match="lost"):
            device._request(echo(1))
    finally:
        device.close()


def test_the_answer_limit_admits_a_read_of_the_whole_window():
    words = np.zeros(MNCORE2_SIM.groups * MNCORE2_SIM.sim_window_lw, dtype="<u8")
    from mlsdk.device.rtl.driver import pack_words

    line = json.dumps({"data": pack_words(words), "cycles": 1, "port_beats": [], "seq": 1})
    assert len(line) < cocotb_session.answer_limit(MNCORE2_SIM)


def test_run_folders_are_private_and_removed_when_the_session_ends_well(runs):
    session = FakeSession(MNCORE2_SIM)
    folder = session.test_dir
    assert folder.parent == runs and folder.name.startswith(f"fake-{os.getpid()}-")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert session.request(echo(1), 5.0)["value"] == 1
    session.close(timeout=5.0)
    assert not folder.exists()


def test_run_folders_are_kept_on_request(runs, monkeypatch):
    monkeypatch.setenv(KEEP_RUNS_ENV, "1")
    session = FakeSession(MNCORE2_SIM)
    session.close(timeout=5.0)
    assert (session.test_dir / "simulator.log").exists()


def test_a_failed_sessions_run_folder_is_kept_and_named(runs):
    session = FakeSession(MNCORE2_SIM)
    answer = session.request({"op": "echo", "raw": "garbage"}, 5.0)
    session.close(timeout=5.0)
    assert answer["fatal"] and f"run folder kept: {session.test_dir}" in answer["error"]
    assert (session.test_dir / "simulator.log").exists()
