"""Session: the open device, its report history, and the recorder of every device command."""

from __future__ import annotations

import weakref
from typing import Any

from mncore_hdl.layout import Layout, from_device

from . import trace
from .device.base import Device, DeviceLock, DramDevice
from .device.commands import Buffer, Command, CommandResult, HostRead
from .device.replay import replay_read
from .errors import DeviceError
from .report import DEFAULT_HISTORY, CallRecord, History, Report

__all__ = ["Session"]


class Session:
    """One open device and the record of what it did: what every front-end object holds.

    :class:`~mlsdk.context.Context` is the user's facade over a Session; TensorProxies,
    compiled functions and the registry hold the Session itself, so that nothing below the
    facade depends on it.

    Parameters
    ----------
    device : Device
        The opened backend (``MNDevice(...).open()``). The Session owns it: :meth:`close`, or
        the Session being collected, closes it.
    history : int or None
        Records :meth:`report` keeps (the most recent; older ones survive in its totals).
        None keeps every record.

    Examples
    --------
    >>> session = Session(MNDevice("mncore2:auto").open())
    >>> buf = session.dram.allocate(host_layout((4, 8)))
    >>> with session.lock:
    ...     record = session.new_record("upload", kind="write")
    ...     session.execute(HostWrite(buf, image), record)
    >>> session.report().records[-1].bytes["host"]
    """

    def __init__(self, device: Device, *, history: int | None = DEFAULT_HISTORY):
        if not isinstance(device, Device):
            raise TypeError(f"Session takes an opened Device, not {type(device).__name__}")
        self.device = device
        # The device as one with memory (an ABC's isinstance is slow, and asked per command).
        self._dram = device if isinstance(device, DramDevice) else None
        self.history = History(history)
        self.closed = False
        # Ends the device when the Session is collected or the interpreter exits, so a program
        # that never calls close() still stops its simulator and completes its waveforms.
        self._finalizer = weakref.finalize(self, device.close)

    def __repr__(self) -> str:
        return f"Session({self.name!r}{', closed' if self.closed else ''})"

    @property
    def name(self) -> str:
        """The device string of the session's device."""
        return self.device.name

    @property
    def lock(self) -> DeviceLock:
        """The device's lock: hold it across everything that must not interleave."""
        return self.device.lock

    @property
    def dram(self) -> DramDevice:
        """The device, as one with device memory.

        Raises
        ------
        DeviceError
            The device has none (the host reference).
        """
        device = self._dram
        if device is None:
            raise DeviceError(f"{self.device.name} runs on the host and has no device memory; "
                              "that needs a device backend such as mncore2:auto")
        return device

    def check_open(self) -> None:
        """Raise DeviceError once the session is closed."""
        if self.closed:
            raise DeviceError("This Context is closed; create a new one")

    def close(self) -> None:
        """Close the device; closing twice does nothing."""
        if self.closed:
            return
        self.closed = True
        self._finalizer()

    # -- the recorder -----------------------------------------------------------------------

    def new_record(self, function: str, kind: str = "call") -> CallRecord:
        """Start the report's record of one call, load, read or write, and return it.

        Parameters
        ----------
        function : str
            What the record is of (a function's name, ``"x.cpu()"``, ...).
        kind : str
            ``"call"``, ``"load"``, ``"read"``, ``"write"`` or ``"compile"``.
        """
        record = CallRecord(function, kind, cycles_kind=self.device.cycles_kind)
        self.history.append(record)
        return record

    def execute(self, command: Command, record: CallRecord) -> CommandResult:
        """Execute ``command`` on the device (through the active trace, if any) and add what
        it cost to ``record``.

        Raises
        ------
        DeviceError
            The device has no device memory, or the command failed.
        """
        tracer = trace.active
        device = self.dram
        result = (device.execute(command) if tracer is None
                  else tracer.execute(device, command, record))
        record.add(result)
        return result

    def read_tensor(self, buf: Buffer, layout: Layout, record: CallRecord) -> Any:
        """:meth:`execute` ``HostRead(buf, layout)`` into ``record`` and return the tensor
        read; on a device that replays (``DramDevice.replays``) and with no trace active,
        replayed: the same steps and figures, no command built or dispatched."""
        device = self.dram
        if device.replays and trace.active is None:
            tensor, result = replay_read(device, buf, layout)
            record.add(result)
            return tensor
        result = self.execute(HostRead(buf, layout), record)
        if result.tensor is not None:
            return result.tensor
        if result.data is None:
            raise DeviceError(f"The device returned no data for HostRead of {buf}")
        return from_device(result.data, layout)

    def report(self, *, clear: bool = False) -> Report:
        """The records kept and the totals over all of them.

        Parameters
        ----------
        clear : bool
            Forget the records and totals once reported (the next report starts afresh).
        """
        with self.lock:
            history = self.history
            report = Report(history.records, self.name, history.totals(), history.dropped)
            if clear:
                history.clear()
        return report
