"""The trace writer behind :mod:`mlsdk.trace`: tracks, slices and the device timelines.

The device clock
----------------
Device slices are placed in cycles of the modeled chip's controller clock
(``ArchConfig.clock_mhz``, 750 MHz), cycle 0 being the start of the trace. The device runs one
command at a time: a command starts at the later of the cycle its host slice began at and the
cycle the previous command ended, and lasts its reported cycles. Cycles become trace timestamps
at that clock (``start + cycle * 1000 / clock_mhz`` ns, rounded from the cycle number so
rounding never accumulates); the exact ``start_cycle`` / ``end_cycle`` are on every device
slice. Idle time on a device track is therefore host time, and a busy device slice is exactly
its cycles long.

Host timestamps are the wall clock, on Perfetto's default trace clock (BOOTTIME) where the OS
has it. Packets are written in timestamp order.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from .device.commands import Bind, Launch

if TYPE_CHECKING:
    from .device.base import DramDevice
    from .device.commands import Command, CommandResult
    from .report import CallRecord

__all__ = ["Tracer", "Slice", "DEVICE_TRACKS"]

#: Device tracks, top to bottom: (name, what runs on it).
DEVICE_TRACKS: tuple[tuple[str, str], ...] = (
    ("host port", "HostWrite and HostRead: host <-> DRAM through the memory controllers' "
                  "host port"),
    ("compute", "Launch: the program's loads, its compute and its stores (compute port)"),
    ("layout converter", "Convert: DRAM -> DRAM layout conversion by the layout converter"),
    ("descriptors", "Bind: a relocation, one input-descriptor register write; no DRAM traffic"),
)
_TRACK_OF = {"HostWrite": "host port", "HostRead": "host port", "Launch": "compute",
             "Convert": "layout converter", "Bind": "descriptors"}

# One writer sequence for the whole file; events name their track explicitly.
_SEQUENCE_ID = 0x6D6C
# Pending packets are written out once no slice is open and at least this many wait.
_FLUSH_PACKETS = 2048

_CLOCK = getattr(time, "CLOCK_BOOTTIME", None)

def _now() -> int:
    """Host wall-clock time in ns, on Perfetto's default trace clock (BOOTTIME) where the OS
    has it."""
    if _CLOCK is not None:
        return time.clock_gettime_ns(_CLOCK)
    return time.monotonic_ns()


class Slice:
    """An open slice: its BEGIN packet (arguments are written into it when it ends)."""

    __slots__ = ("track", "packet", "start", "args", "totals", "ended")

    def __init__(self, track: int, packet: Any, start: int, args: dict[str, Any]):
        self.track = track
        self.packet = packet
        self.start = start
        self.args = args
        self.totals: dict[str, int] = {}
        self.ended = False

    def add(self, result: CommandResult, kind: str) -> None:
        totals = self.totals
        for path, n in result.bytes.items():
            totals[f"{path}_bytes"] = totals.get(f"{path}_bytes", 0) + n
        totals["cycles"] = totals.get("cycles", 0) + result.cycles
        totals["commands"] = totals.get("commands", 0) + 1
        key = f"{kind}_commands"
        totals[key] = totals.get(key, 0) + 1


class _DeviceTimeline:
    """One device's tracks and the cycle its last command ended at."""

    def __init__(self, device: DramDevice, tracks: dict[str, int]):
        self.device = weakref.ref(device)
        self.tracks = tracks
        self.mhz = float(device.config.clock_mhz)
        self.cursor = 0


def _annotate(event: Any, args: Mapping[str, Any]) -> None:
    for name, value in args.items():
        note = event.debug_annotations.add()
        note.name = name
        if isinstance(value, bool):
            note.bool_value = value
        elif isinstance(value, int):
            note.int_value = value
        elif isinstance(value, float):
            note.double_value = value
        else:
            note.string_value = str(value)


class Tracer:
    """Builds one trace file: track descriptors, slices, the device timelines.

    Created by :class:`trace_scope`; every method may be called from any thread.

    Parameters
    ----------
    path : str
        The file being written (for messages).
    file : binary file
        Open for writing; the Tracer writes to it, the scope closes it.
    """

    def __init__(self, path: str, file: IO[bytes]):
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

        self.path = path
        self._pb = pb
        self._builder = StreamingTraceProtoBuilder(file)
        self._lock = threading.RLock()
        self._pending: list[Any] = []
        self._open: dict[int, Slice] = {}
        self._local = threading.local()
        self._uuids = itertools.count((os.getpid() << 20) + 1)
        self._flows = itertools.count(1)
        self._threads: dict[int, int] = {}
        self._devices: dict[int, _DeviceTimeline] = {}
        self.start_ns = _now()
        #: The first error writing the file (tracing stops there; the scope raises it).
        self.error: OSError | None = None
        self.closed = False
        self._pid = os.getpid()
        self._process = next(self._uuids)
        first = self._descriptor(self._process, self.start_ns)
        first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        first.track_descriptor.process.pid = self._pid
        first.track_descriptor.process.process_name = "mlsdk host"
        first.track_descriptor.description = "Host activity, wall clock: one track per thread"

    # -- packets and tracks -----------------------------------------------------------------

    def _packet(self, timestamp: int) -> Any:
        packet = self._builder.create_packet()
        packet.trusted_packet_sequence_id = _SEQUENCE_ID
        packet.timestamp = timestamp
        self._pending.append(packet)
        return packet

    def _descriptor(self, uuid: int, timestamp: int) -> Any:
        # Timestamped no later than the first event on the track, so the file stays sorted.
        packet = self._packet(timestamp)
        packet.track_descriptor.uuid = uuid
        return packet

    def _thread_track(self) -> int:
        tid = threading.get_native_id()
        track = self._threads.get(tid)
        if track is None:
            track = self._threads[tid] = next(self._uuids)
            desc = self._descriptor(track, _now()).track_descriptor
            desc.parent_uuid = self._process
            desc.thread.pid = self._pid
            desc.thread.tid = tid
            desc.thread.thread_name = threading.current_thread().name
        return track

    def _timeline(self, device: DramDevice, issued: int) -> _DeviceTimeline:
        timeline = self._devices.get(id(device))
        if timeline is not None and timeline.device() is device:
            return timeline
        group = next(self._uuids)
        desc = self._descriptor(group, issued).track_descriptor
        desc.name = f"device {device.name}"
        desc.description = (f"The device's own timeline, in cycles of its {device.config.clock_mhz}"
                            f" MHz clock ({device.cycles_kind} cycles)")
        desc.child_ordering = self._pb.TrackDescriptor.EXPLICIT
        tracks = {}
        for rank, (name, what) in enumerate(DEVICE_TRACKS):
            tracks[name] = next(self._uuids)
            child = self._descriptor(tracks[name], issued).track_descriptor
            child.parent_uuid = group
            child.name = name
            child.description = what
            child.sibling_order_rank = rank
        timeline = self._devices[id(device)] = _DeviceTimeline(device, tracks)
        return timeline

    def _stack(self) -> list[Slice]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    # -- slices -----------------------------------------------------------------------------

    def begin(self, name: str, category: str, args: Mapping[str, Any] | None = None,
              ) -> Slice | None:
        """Open a slice on the calling thread's track; None once the trace is closed."""
        with self._lock:
            if self.closed:
                return None
            track = self._thread_track()
            start = _now()
            packet = self._packet(start)
            event = packet.track_event
            event.type = self._pb.TrackEvent.TYPE_SLICE_BEGIN
            event.track_uuid = track
            event.name = name
            event.categories.append(category)
            opened = Slice(track, packet, start, dict(args or {}))
            self._open[id(opened)] = opened
            self._stack().append(opened)
            return opened

    def end(self, opened: Slice | None, args: Mapping[str, Any] | None = None) -> None:
        """Close ``opened`` (a no-op for None or a slice already closed)."""
        with self._lock:
            if opened is None or opened.ended:
                return
            stack = self._stack()
            if opened in stack:
                stack.remove(opened)
            self._finish(opened, _now(), args)
            if not self._open and len(self._pending) >= _FLUSH_PACKETS:
                self._flush(until=_now())

    def _finish(self, opened: Slice, timestamp: int, args: Mapping[str, Any] | None) -> None:
        opened.ended = True
        del self._open[id(opened)]
        _annotate(opened.packet.track_event, {**opened.args, **opened.totals, **(args or {})})
        event = self._packet(timestamp).track_event
        event.type = self._pb.TrackEvent.TYPE_SLICE_END
        event.track_uuid = opened.track

    def annotate(self, args: Mapping[str, Any]) -> bool:
        """Add ``args`` to the calling thread's innermost open slice; False if there is none."""
        with self._lock:
            stack = self._stack()
            if not stack:
                return False
            stack[-1].args.update(args)
            return True

    # -- device commands --------------------------------------------------------------------

    def execute(self, device: DramDevice, command: Command, record: CallRecord) -> CommandResult:
        """Execute ``command`` on ``device``, recording it on the host and the device tracks."""
        opened = self.begin(command.kind, "command",
                            {"command": command.summary(), "function": record.function,
                             "record": record.kind})
        if opened is None:
            return device.execute(command)
        try:
            result = device.execute(command)
        except BaseException as exc:
            self.end(opened, {"error": f"{type(exc).__name__}: {exc}"})
            raise
        with self._lock:
            figures = {**{f"{p}_bytes": n for p, n in result.bytes.items()},
                       "cycles": result.cycles, "cycles_kind": device.cycles_kind}
            opened.args.update(figures)
            flow = next(self._flows)
            opened.packet.track_event.flow_ids.append(flow)
            if not self.closed:
                self._device_slice(device, command, opened.start, figures, flow)
            for outer in self._stack():
                if outer is not opened:
                    outer.add(result, command.kind)
        self.end(opened)
        return result

    def _device_slice(self, device: DramDevice, command: Command, issued: int,
                      figures: dict[str, Any], flow: int) -> None:
        timeline = self._timeline(device, issued)
        mhz = timeline.mhz
        issue_cycle = math.ceil((issued - self.start_ns) * mhz / 1000)
        start = max(timeline.cursor, issue_cycle)
        end = start + int(figures["cycles"])
        timeline.cursor = end
        track = timeline.tracks[_TRACK_OF[command.kind]]
        event = self._packet(self.start_ns + round(start * 1000 / mhz)).track_event
        event.type = self._pb.TrackEvent.TYPE_SLICE_BEGIN
        event.track_uuid = track
        event.name = _device_name(command)
        event.categories.append("device")
        event.terminating_flow_ids.append(flow)
        _annotate(event, {"command": command.summary(), **figures, "start_cycle": start,
                          "end_cycle": end})
        event = self._packet(self.start_ns + round(end * 1000 / mhz)).track_event
        event.type = self._pb.TrackEvent.TYPE_SLICE_END
        event.track_uuid = track

    # -- writing ----------------------------------------------------------------------------

    def _flush(self, until: int | None = None) -> None:
        """Write the pending packets in timestamp order (stable: equal timestamps keep the
        order they happened in), holding back those later than ``until``: a device slice can
        end ahead of the host clock, and the file stays sorted by time."""
        pending = sorted(self._pending, key=lambda p: p.timestamp)
        keep = 0 if until is None else sum(1 for p in pending if p.timestamp > until)
        self._pending = pending[len(pending) - keep:]
        if self.error is not None:
            return
        try:
            for packet in pending[:len(pending) - keep]:
                self._builder.write_packet(packet)
        except OSError as exc:
            # Tracing stops here; the program goes on, and the scope reports it on exit.
            self.error = exc
            self.closed = True

    def close(self) -> None:
        """End every slice still open (marked ``unfinished``) and write what is pending."""
        with self._lock:
            if self.closed and not self._pending:
                return
            now = _now()
            for opened in list(self._open.values()):
                self._finish(opened, now, {"unfinished": True})
            self.closed = True
            self._flush()


def _device_name(command: Command) -> str:
    if isinstance(command, Launch):
        return f"Launch {command.program}"
    if isinstance(command, Bind):
        return f"Bind {command.io}"
    return command.kind
