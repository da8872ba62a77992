"""The cocotb simulator sessions (``mlsdk/device/rtl/cocotb_session.py``) match requests and
answers by sequence number.

A fake server (``tests/sdk/device/fake_cosim_server.py``) stands in for the cocotb server behind
the real :class:`~mlsdk.device.rtl.icarus.IcarusSession`, so the matching is tested without a
simulator: a caller interrupted by Ctrl-C never makes a later request read its answer. The
matching itself is in ``test_rtl_protocol.py``, the Amaranth session's in
``test_rtl_amaranth_sim.py``.
"""

from __future__ import annotations

import pytest
from cosim_fakes import FakeSession, echo, interrupted
from mlsdk.device.rtl import runfolder
from mncore_hdl.arch import MNCORE2_SIM


@pytest.fixture
def socket_session(request, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_COSIM_MODE", getattr(request, "param", ""))
    monkeypatch.setattr(runfolder, "COSIM_ROOT", tmp_path)  # a failed session keeps its run folder
    session = FakeSession(MNCORE2_SIM)
    dropped: list[tuple[dict, dict]] = []
    session.exchange.on_dropped = lambda req, ans: dropped.append((req, ans))
    session.dropped = dropped  # type: ignore[attr-defined]
    yield session
    session.close(timeout=5.0)


def test_socket_session_resynchronises_after_an_interrupt(socket_session):
    s = socket_session
    assert s.request(echo(1), 5.0)["value"] == 1
    interrupted(s, echo(2, delay=1.0))
    assert s.exchange.interrupted
    interrupted(s, echo(3, delay=1.0))  # interrupted again while still behind
    assert s.request(echo(4), 5.0)["value"] == 4
    assert [(req["value"], ans["value"]) for req, ans in s.dropped] == [(2, 2), (3, 3)]
    assert not s.exchange.interrupted
    assert s.request(echo(5), 5.0)["value"] == 5


@pytest.mark.parametrize("socket_session", ["noseq", "future", "twice"], indirect=True)
def test_socket_session_refuses_an_answer_for_an_unknown_request(socket_session):
    s = socket_session
    first = s.request(echo(1), 5.0)
    if first.get("value") == 1:  # "twice": the duplicate shows up on the next request
        first = s.request(echo(2), 5.0)
    assert first.get("fatal") and "out of step" in first["error"]
    later = s.request(echo(3), 5.0)
    assert later.get("fatal") and "value" not in later


def test_socket_session_interrupted_while_sending_is_refused(socket_session):
    s = socket_session
    real = s.sock

    class HalfSend:
        def sendall(self, data: bytes) -> None:
            real.sendall(data[: len(data) // 2])
            raise KeyboardInterrupt

        def __getattr__(self, name):
            return getattr(real, name)

    s.sock = HalfSend()
    with pytest.raises(KeyboardInterrupt):
        s.request(echo(1), 5.0)
    s.sock = real
    answer = s.request(echo(2), 5.0)
    assert answer.get("fatal")
    assert "interrupted while sending" in answer["error"] and "new one" in answer["error"]
    assert s.proc.wait(10) is not None  # the simulator was stopped
