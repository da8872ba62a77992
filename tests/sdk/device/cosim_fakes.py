"""The fake simulator the device tests run the real sessions against: ``fake_cosim_server.py``
(a script the session starts in place of the cocotb server) behind the real
:class:`~mlsdk.device.rtl.icarus.IcarusSession` and :class:`~mlsdk.device.rtl.device.RtlDevice`."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlsdk.device.rtl.device import RtlDevice
from mlsdk.device.rtl.icarus import IcarusSession
from mlsdk.testing.interrupts import sigint_after

FAKE_SERVER = Path(__file__).with_name("fake_cosim_server.py")


class FakeSession(IcarusSession):
    """The Icarus session, starting the fake server instead of a simulator."""

    kind = "fake"
    label = "Fake"
    launcher = str(FAKE_SERVER)

    def _build(self, say):
        return Path(".")


class FakeDevice(RtlDevice):
    """The real RTL device over the fake server."""

    simulator = "fake"

    def _open_session(self) -> FakeSession:
        return FakeSession(self.config)


def echo(value: int, delay: float = 0.0) -> dict:
    """The fake server's echo operation: it answers ``value`` after ``delay`` seconds."""
    return {"op": "echo", "value": value, "delay": delay}


def interrupted(session, msg: dict, after: float = 0.2) -> None:
    """Send ``msg`` on ``session`` and interrupt the caller (SIGINT) ``after`` seconds in."""
    with pytest.raises(KeyboardInterrupt), sigint_after(after):
        session.request(msg, 30.0)
