"""The simulator sessions' per-process build memo, and which build a session runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlsdk.device.rtl import builds
from mncore_hdl.arch import MNCORE2_SIM


def test_a_build_is_checked_once_per_process_while_its_folder_exists(tmp_path):
    memo = builds.BuildMemo()
    calls: list[str] = []
    folder = tmp_path / "build"

    def build(say) -> Path:
        calls.append("build")
        folder.mkdir(exist_ok=True)
        return folder

    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert calls == ["build"]
    assert memo.folder("fake+waves", MNCORE2_SIM, build, print) == folder  # another variant
    assert calls == ["build", "build"]
    folder.rmdir()  # a deleted build folder is built (checked) again
    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert calls == ["build", "build", "build"]



@pytest.mark.parametrize(("waves", "one_model", "trace"), [
    (None, "0", False), (None, "1", "fst"), ("w.vcd", "1", "vcd"), ("w.fst", "0", "fst")])
def test_which_verilator_model_a_session_runs(monkeypatch, waves, one_model, trace):
    """Without waves the untraced model, or under $MNCORE_VERILATOR_ONE_MODEL the FST one
    (the rtl tier's one build); with waves the model of their format."""
    from mlsdk.device.rtl.verilator import VerilatorSession

    monkeypatch.setenv("MNCORE_VERILATOR_ONE_MODEL", one_model)
    session = VerilatorSession.__new__(VerilatorSession)  # no build, no simulator
    session.waves = Path(waves) if waves else None
    assert session._trace() == trace
    assert session._variant() == (f"+waves-{trace}" if trace else "")
