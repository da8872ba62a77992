"""Requests and answers of the simulator sessions are matched by sequence number.

A fake server (``tests/sdk/device/fake_cosim_server.py``) stands in for the cocotb server behind
the real :class:`~mlsdk.device.rtl.icarus.IcarusSession`, and a fake testbench thread behind the
real :class:`~mlsdk.device.rtl.amaranth_sim.AmaranthSession`, so the matching is tested without
a simulator: a caller interrupted by Ctrl-C never makes a later request read its answer.
"""

from __future__ import annotations

import time

import pytest
import torch
from cosim_fakes import FakeSession, echo
from mlsdk import storage
from mlsdk.device.rtl import runfolder
from mlsdk.device.rtl.amaranth_sim import AmaranthSession
from mlsdk.device.rtl.protocol import Exchange, ProtocolError
from mlsdk.testing.interrupts import sigint_after
from mncore_hdl.arch import MNCORE2_SIM


def interrupted(session, msg: dict, after: float = 0.2) -> None:
    with pytest.raises(KeyboardInterrupt), sigint_after(after):
        session.request(msg, 30.0)


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


def test_exchange_drops_older_answers_and_rejects_unknown_ones():
    ex = Exchange("Test")
    dropped = []
    ex.on_dropped = lambda req, ans: dropped.append((req["value"], ans["value"]))
    wire1, seq1, _ = ex.open({"op": "echo", "value": 1, "data": "big"}, 1.0)
    assert wire1 == {"op": "echo", "value": 1, "data": "big", "seq": seq1}
    _, seq2, _ = ex.open({"op": "echo", "value": 2}, 1.0)  # request 1's caller went away
    assert ex.interrupted
    assert not ex.accept({"value": 1, "seq": seq1}, seq2)
    assert dropped == [(1, 1)]
    assert ex.accept({"value": 2, "seq": seq2}, seq2)
    assert not ex.interrupted
    _, seq3, _ = ex.open({"op": "echo"}, 1.0)
    for bad in ({"seq": seq1}, {"seq": seq3 + 1}, {"seq": None}, {}):
        with pytest.raises(ProtocolError, match="out of step"):
            ex.accept(bad, seq3)


def test_exchange_forgets_answers_lost_to_an_interrupt():
    """An answer read but lost before its caller took it is pruned by the next answer."""
    ex = Exchange("Test")
    _, seq1, _ = ex.open({"op": "a"}, 1.0)
    _, seq2, _ = ex.open({"op": "b"}, 1.0)
    assert ex.accept({"seq": seq2}, seq2)
    assert not ex.interrupted
    with pytest.raises(ProtocolError):
        ex.accept({"seq": seq1}, seq2)


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


class FakeBenchSession(AmaranthSession):
    """The real AmaranthSession around a fake testbench thread (no simulator)."""

    def _run(self) -> None:
        self._responses.put({"ready": True})
        while True:
            msg = self._requests.get()
            if msg.get("op") == "stop":
                return
            time.sleep(msg.get("delay", 0))
            self._responses.put({"value": msg.get("value"), "seq": msg.get("seq")})


def test_amaranth_session_resynchronises_after_an_interrupt():
    s = FakeBenchSession(MNCORE2_SIM)
    dropped: list[int] = []
    s.exchange.on_dropped = lambda req, ans: dropped.append(ans["value"])
    try:
        assert s.request(echo(1), 5.0)["value"] == 1
        interrupted(s, echo(2, delay=0.8))
        assert s.request(echo(3), 5.0)["value"] == 3
        assert dropped == [2]
        s._responses.put({"value": 99, "seq": 42})  # an answer nobody asked for
        bad = s.request(echo(4), 5.0)
        assert bad.get("fatal") and "out of step" in bad["error"]
        assert s.request(echo(5), 5.0).get("fatal")
    finally:
        s.close(timeout=5.0)


def scale(inputs):
    return {"y": inputs["x"] * 3}


def test_an_interrupted_compiled_call_hands_nothing_out_and_rebinds(context, tmp_path):
    """Ctrl-C inside a call: the lock is free, its outputs are given back, the next call is
    right, and a Bind that was under way is redone."""
    x = torch.arange(64.0).reshape(8, 8)
    f = context.compile(scale, {"x": x}, storage.path(tmp_path / "f"))
    g = context.compile(scale, {"x": x}, storage.path(tmp_path / "g"),
                        io_spec_constraints={"y": f.input_specs["x"]})
    producer = g({"x": x})["y"]  # in f's input layout: handed over by a Bind
    device = context.device
    live = len(device.allocator.live)
    real = device._execute
    state = {"armed": True}

    def interrupt_at_launch(command):
        if state["armed"] and type(command).__name__ == "Launch":
            state["armed"] = False
            raise KeyboardInterrupt
        return real(command)

    device._execute = interrupt_at_launch
    with pytest.raises(KeyboardInterrupt):
        f({"x": producer})  # relocation: binds x to the producer's buffer, then Launch
    assert device.lock.acquire_if_idle()
    device.lock.__exit__()
    assert len(device.allocator.live) == live
    assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
    assert torch.equal(f({"x": producer})["y"].cpu(), x * 9)

    state["armed"] = True
    binds = []

    def interrupt_after_bind(command):
        result = real(command)
        if state["armed"] and type(command).__name__ == "Bind":
            state["armed"] = False
            binds.append(command)
            raise KeyboardInterrupt  # the register was written; the runtime never heard
        return result

    device._execute = interrupt_after_bind
    with pytest.raises(KeyboardInterrupt):
        f({"x": producer})
    device._execute = real
    assert "x" not in f.bindings  # forgotten, so the next call binds it again
    assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
