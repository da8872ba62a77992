"""The Amaranth-simulator device (``mlsdk/device/rtl/amaranth_sim.py``): the DRAM it can
simulate, and its session's matching of requests and answers, the real
:class:`~mlsdk.device.rtl.amaranth_sim.AmaranthSession` around a fake testbench thread (no
simulator)."""

from __future__ import annotations

import time

import pytest
from cosim_fakes import echo, interrupted
from mlsdk.device.rtl.amaranth_sim import AmaranthDevice, AmaranthSession
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM


def test_rtl_device_refuses_a_dram_larger_than_the_window():
    with pytest.raises(ValueError, match="simulate 524288 LW of DRAM per Group"):
        AmaranthDevice(MNCORE2, "mncore2:rtl")


class FakeBenchSession(AmaranthSession):
    """The real AmaranthSession around a fake testbench thread (no simulator)."""

    def _run(self) -> None:
        self._responses.put({"ready": True})
        while True:
            msg = self._requests.get()
            if msg.get("op") == "stop":
                return
            time.sleep(msg.get("delay", 0))
            if msg.get("stray"):  # first an answer nobody asked for
                self._responses.put({"value": 99, "seq": 42})
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
        bad = s.request({**echo(4), "stray": True}, 5.0)  # after an answer nobody asked for
        assert bad.get("fatal") and "out of step" in bad["error"]
        assert s.request(echo(5), 5.0).get("fatal")
    finally:
        s.close(timeout=5.0)
