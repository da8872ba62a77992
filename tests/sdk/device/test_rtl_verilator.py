"""The Verilator session (``mlsdk/device/rtl/verilator.py``): which of its builds a session
runs."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize(("waves", "one_model", "trace"), [
    (None, "0", False), (None, "1", "fst"), ("w.vcd", "1", "vcd"), ("w.fst", "0", "fst")])
def test_which_verilator_model_a_session_runs(monkeypatch, waves, one_model, trace):
    """Without waves the untraced model, or under $MNCORE_VERILATOR_ONE_MODEL the FST one
    (the rtl tier's one build); with waves the model of their format."""
    from mlsdk.device.rtl.verilator import VerilatorSession

    monkeypatch.setenv("MNCORE_VERILATOR_ONE_MODEL", one_model)
    session = VerilatorSession.__new__(VerilatorSession)  # no build, no simulator
    session.waves = Path(waves) if waves else None
    assert session.model_trace == trace
    assert session.build_variant == (f"+waves-{trace}" if trace else "")
