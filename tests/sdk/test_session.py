"""Session's public API: the open device, its record, and the commands run through it."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.device.base import DramDevice
from mlsdk.device.commands import Buffer, HostRead, HostWrite
from mlsdk.device.functional import FunctionalDevice
from mlsdk.errors import DeviceError
from mlsdk.session import Session
from mncore_hdl.layout import host_layout, to_device

LAYOUT = host_layout((4, 8))


@pytest.fixture
def session():
    session = Session(MNDevice("mncore2:auto").open(), history=3)
    yield session
    session.close()


def test_a_session_takes_an_opened_device():
    with pytest.raises(TypeError, match="Session takes an opened Device, not MNDevice"):
        Session(MNDevice("mncore2:auto"))  # type: ignore[arg-type]


def test_it_names_its_device_and_shares_its_lock(session):
    assert session.name == "mncore2:auto" and repr(session) == "Session('mncore2:auto')"
    assert session.lock is session.device.lock
    assert isinstance(session.dram, DramDevice) and session.dram is session.device


def test_execute_runs_a_command_and_records_what_it_cost(session):
    buf = session.dram.allocate(LAYOUT, "test")
    image = to_device(torch.arange(32.0).reshape(4, 8), LAYOUT)
    with session.lock:
        record = session.new_record("upload", kind="write")
        result = session.execute(HostWrite(buf, image), record)
    assert result.bytes["host"] == buf.nbytes
    assert record.function == "upload" and record.kind == "write"
    assert record.cycles_kind == "modeled"
    assert [r.command for r in record.commands] == [result.command]
    read = session.execute(HostRead(buf), session.new_record("x.cpu()", kind="read"))
    assert np.array_equal(read.data, image)


def test_report_keeps_the_last_history_records_and_clears(session):
    for n in range(5):
        session.new_record(f"f{n}")
    report = session.report()
    assert [r.function for r in report.records] == ["f2", "f3", "f4"]
    assert report.dropped == 2 and report.device == "mncore2:auto"
    assert session.report(clear=True).records
    assert session.report().records == []


def test_close_closes_the_device_once_and_check_open_says_so(session):
    session.check_open()
    session.close()
    session.close()
    assert session.closed and session.device.closed
    assert repr(session) == "Session('mncore2:auto', closed)"
    with pytest.raises(DeviceError, match="This Context is closed; create a new one"):
        session.check_open()


def test_a_collected_session_closes_its_device():
    device = MNDevice("mncore2:auto").open()
    session = Session(device)
    del session
    gc.collect()
    assert device.closed


def test_without_device_memory_dram_and_execute_say_so():
    session = Session(MNDevice("pfvm:cpu").open())
    assert not session.device.has_memory
    with pytest.raises(DeviceError, match="pfvm:cpu runs on the host and has no device memory"):
        session.dram  # noqa: B018
    with pytest.raises(DeviceError, match="pfvm:cpu runs on the host and has no device memory"):
        session.execute(HostRead(Buffer(1, 0, 1, 0, 8)), session.new_record("x"))
    session.close()


def test_the_context_is_a_facade_over_its_session(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        session = context.session
        assert context.device is session.device
        f = context.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(4, 8)},
                            storage.path(tmp_path / "f"))
        y = f({"x": torch.ones(4, 8)})["y"]
        # What the front end holds is the session, never the Context.
        assert f.session is session and y.session is session
        assert f.registry is context.registry
        assert context.report().records == session.report().records
    assert session.closed and context.closed


@pytest.fixture
def failing_close(monkeypatch):
    """Devices whose close fails, as an RTL session's does when its wave file was cut short."""
    def close(self) -> None:
        raise DeviceError("the wave file build/w.vcd was cut short")

    monkeypatch.setattr(FunctionalDevice, "close", close)


def test_a_failed_close_never_masks_the_blocks_own_exception(failing_close):
    with pytest.warns(RuntimeWarning, match="cut short"), pytest.raises(ValueError, match="mine"):
        with Context(MNDevice("mncore2:auto")) as context:
            raise ValueError("mine")
    assert context.closed and Context.current() is not context


def test_a_failed_close_with_no_exception_raises_it(failing_close):
    with pytest.raises(DeviceError, match="cut short"):
        with Context(MNDevice("mncore2:auto")) as context:
            pass
    assert context.closed and Context.current() is not context
