"""The thin base of the RTL-backed devices: the command stream executed on the co-simulation top.

:class:`RtlDevice` fills the :class:`~mlsdk.device.base.DramDevice` hooks with driver operations
sent to a simulator session; a subclass only says how to start its session
(:meth:`RtlDevice._open_session`): ``mncore2:rtl`` runs Amaranth's simulator in-process
(:class:`~mlsdk.device.rtl.amaranth_sim.AmaranthDevice`), ``mncore2:icarus`` runs Icarus in a
child process (:class:`~mlsdk.device.rtl.icarus.IcarusDevice`). Bytes per path come from the
controllers' own port beat counters and the converter's beat counters; cycles are simulated
clock cycles (``measured``). The PE array's compute cycles stay modeled, as on the functional
model (the base's ``_compute_cycles``).
"""

from __future__ import annotations

import math
import os
import sys
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts.testbench import NO_BUFFER, CommandKind
from mncore_hdl.descriptors import SlotTable
from mncore_hdl.layout import ConversionDescriptor

from ...errors import DeviceError
from ...settings import SDK
from ..base import PAGE_LW, Device, DramDevice, DramSnapshot
from ..commands import Bind, Buffer, Command, CommandResult, Convert, HostRead, HostWrite, Launch
from .images import Images
from .protocol import Exchange
from .waves import (
    Mark,
    make_waves_folder,
    pick_wave_format,
    waves_calls,
    waves_folder,
    write_gtkw,
)

__all__ = ["RtlDevice", "RtlSession", "Progress"]

#: ``progress(cycle, operations_done)``: how a session reports simulated time.
Progress = Callable[[int, int], None]

#: Wall seconds allowed per operation: a base plus a generous per-cycle budget.
TIMEOUT_BASE = SDK["MNCORE_COSIM_TIMEOUT"].get()
TIMEOUT_PER_LW = 0.05


class RtlSession(Protocol):
    """A running simulation of the co-simulation top, as :class:`RtlDevice` uses it.

    Requests and answers are matched by sequence number (:mod:`.protocol`): after a caller
    was interrupted (Ctrl-C), the next request drains the interrupted one's answer and hands
    it to ``exchange.on_dropped``, or, when the session cannot be resynchronised, fails for good.
    """

    exchange: Exchange
    #: How requests carry images and answers return them (:mod:`.images`).
    images: Images

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Execute one driver operation; ``{"error": ...}`` when it fails."""
        ...

    def lose(self, reason: str) -> str:
        """Give the session up (every later request fails with ``reason``)."""
        ...

    def close(self, timeout: float = ...) -> None:
        """Stop the simulation (its VCD, if any, is then complete)."""
        ...


#: Set to 1 to print the progress lines (builds, simulated cycles) on stderr even when it is
#: not a terminal (a CI log); 0 to silence them on a terminal.
PROGRESS_ENV = SDK["MNCORE_PROGRESS"].name


def show_progress() -> bool:
    """Whether progress lines go to stderr: ``$MNCORE_PROGRESS`` if set, else a terminal."""
    value = SDK["MNCORE_PROGRESS"].get()
    return sys.stderr.isatty() if value is None else value


def _progress_printer() -> Progress | None:
    """Prints simulated cycles and operations on a terminal (stderr), at most once a second."""
    if not show_progress():
        return None
    last = [0.0]

    def show(cycle: int, ops: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            sys.stderr.write(f"\r[cosim] {cycle:,} cycles simulated, {ops} operations done ")
            sys.stderr.flush()
    return show


class RtlDevice(DramDevice):
    """MN-Core 2's memory system in RTL simulation: exact data, measured cycles.

    Parameters
    ----------
    config : ArchConfig
        The chip; its DRAM must be the RTL's simulated window (``MNCORE2_SIM``).
    name : str
        The device string.
    waves : path, optional
        Folder for the session's wave file and GTKWave save file.
    calls : str, optional
        Record only these calls (``"2-3"``, ``"1,4"``; see :func:`.waves.parse_calls`);
        default ``$MNCORE_WAVES_CALLS``, else every call.
    wave_format : str, optional
        ``"fst"`` or ``"vcd"``; default ``$MNCORE_WAVES_FORMAT``, else the simulator's
        (:data:`.waves.DEFAULT_FORMAT`).
    """

    cycles_kind = "measured"
    #: The simulator's short name, used in the names of the session's files.
    simulator: ClassVar[str]

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None, calls: str | None = None,
                 wave_format: str | None = None):
        if config.dram_lw_per_group > config.sim_window_lw:
            raise ValueError(
                f"RTL devices simulate {config.sim_window_lw} LW of DRAM per Group, but the "
                f"config models {config.dram_lw_per_group}; pass mncore_hdl.arch.MNCORE2_SIM "
                "(or a config whose dram_bytes_per_group equals the simulated window)")
        super().__init__(config, name)
        self.waves_dir = Path(waves) if waves else None
        self.wave_format = pick_wave_format(wave_format, self.simulator)
        self.calls = waves_calls(calls)
        #: The command track: each host command's mark, as the wave file has it.
        self.marks: list[Mark] = []
        self._launches = 0
        self.gtkw_path: Path | None = None
        self.slots = SlotTable()
        self.last_conversion: dict[str, int] = {}
        self._session: RtlSession | None = None
        self._measured: dict[str, int] = {}
        self._port_beats: dict[str, list[list[int]]] = {}
        self._high_water = [0] * config.groups
        self._progress = _progress_printer()
        #: Wall seconds spent, per driver operation (``write``, ``read``, ``convert``, ...) and
        #: ``start`` (starting the simulator), summed over the session: where a flow's wall time
        #: went on the simulator's side (``bench/bench_cosim.py`` prints it).
        self.wall_seconds: dict[str, float] = {}

    @classmethod
    def create(cls, config: ArchConfig, name: str, options: Mapping[str, str]) -> Device:
        """The device, writing waves where the ``waves`` option (or ``$MNCORE_WAVES``) says,
        of the calls the ``calls`` option says, in the ``format`` option's format."""
        return cls(config, name, waves_folder(options.get("waves")), options.get("calls"),
                   options.get("format"))

    # -- the simulator session ---------------------------------------------------------------

    @abstractmethod
    def _open_session(self) -> RtlSession:
        """Start the simulator (writing ``self.vcd_path`` if set, reporting to
        ``self._progress``); raise RuntimeError or OSError when it cannot start."""

    def _start(self) -> RtlSession:
        if self._session is not None:
            return self._session
        if self.waves_dir is not None:
            make_waves_folder(self.waves_dir)
            stem = f"mncore2_{self.simulator}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
            self.vcd_path = self.waves_dir / f"{stem}.{self.wave_format}"
        start = time.perf_counter()
        try:
            session = self._open_session()
        except (RuntimeError, OSError) as exc:
            self._session = None
            raise DeviceError(f"Device {self.name!r} could not start its simulator: {exc}"
                              ) from None
        session.exchange.on_dropped = self._dropped
        self._session = session
        self._add_wall("start", start)
        return session

    def _add_wall(self, what: str, since: float) -> None:
        self.wall_seconds[what] = self.wall_seconds.get(what, 0.0) + time.perf_counter() - since

    def _dropped(self, request: dict[str, Any], answer: dict[str, Any]) -> None:
        """An interrupted operation's late answer: nobody takes its result, but the port's
        beat counters moved, so they become the baseline of the next operation's bytes; an
        image it answered in files is removed."""
        path = request.get("path")
        if isinstance(path, str) and "port_beats" in answer:
            self._port_beats[path] = answer["port_beats"]
        if self._session is not None:
            self._session.images.discard(answer)

    def _say(self, text: str) -> None:
        if show_progress():
            sys.stderr.write(f"[cosim] {text}\n")

    def _request(self, msg: dict[str, Any], lw: int = 0, rows: np.ndarray | None = None,
                 image: tuple[int, ...] | None = None) -> dict[str, Any]:
        """One operation; ``rows``: the image it carries; ``image``: the shape of the image
        its answer returns (as ``"image"``). Raises DeviceError when it fails."""
        self._check_open()
        session = self._start()
        since = time.perf_counter()
        images = session.images
        if rows is not None:
            msg = {**msg, **images.outgoing(rows)}
        if image is not None:
            msg = {**msg, **images.asking()}
        result = session.request(msg, TIMEOUT_BASE + TIMEOUT_PER_LW * lw)
        if "error" not in result and image is not None:
            try:
                result["image"] = images.incoming(result, image)
            except (RuntimeError, ValueError) as exc:
                result = {"error": session.lose(f"the simulator's answer to "
                                                f"{msg.get('op')!r} is unusable: {exc}")}
        self._add_wall(str(msg.get("op")), since)
        if "error" in result:
            raise DeviceError(f"Device {self.name!r}: {msg.get('op')} failed: {result['error']}")
        return result

    # -- the command stream -----------------------------------------------------------------

    def execute(self, command: Command) -> CommandResult:
        self._measured = {}
        result = super().execute(command)
        for path, nbytes in self._measured.items():
            result.bytes[path] = nbytes
        return result

    def _execute(self, command: Command) -> CommandResult:
        if self.waves_dir is not None:  # under the device lock, as the command itself
            self._mark(command)
        return super()._execute(command)

    def _call_of(self, command: Command) -> int:
        """The call ``command`` belongs to: Launch ``n`` is call ``n``; the writes, Binds and
        Converts before it prepare it (call ``n``), the HostReads after it read it back."""
        if isinstance(command, Launch):
            self._launches += 1
            return self._launches
        return self._launches if isinstance(command, HostRead) else self._launches + 1

    def _mark(self, command: Command) -> None:
        """Write the command track (kind, call, buffer, sequence) into the simulation, and
        pause or resume the dump for the ``calls`` window."""
        call = self._call_of(command)
        buf = _moved_buffer(command)
        seq = len(self.marks) + 1
        off = self.calls is not None and call not in self.calls
        answer = self._request({"op": "mark", "kind": int(CommandKind[command.kind]),
                                "call": call, "buffer": NO_BUFFER if buf is None else buf.id,
                                "number": seq, "waves_off": int(off)})
        self.marks.append(Mark(answer.get("time"), seq, command.kind, call,
                               None if buf is None else buf.id, not off))

    def _track(self, buf: Buffer) -> None:
        for g in range(buf.group, buf.group + buf.groups):
            self._high_water[g] = max(self._high_water[g], buf.address + buf.lw_per_group)

    def _count_port(self, path: str, beats: list[list[int]]) -> None:
        """Bytes ``path`` moved in this op: the growth of its controllers' beat counters."""
        before = self._port_beats.get(path, [[0, 0] for _ in beats])
        delta = sum((now - old) % (1 << 32) for b, a in zip(before, beats, strict=True)
                    for old, now in zip(b, a, strict=True))
        self._port_beats[path] = beats
        self._measured[path] = self._measured.get(path, 0) + delta * self.config.lw_bytes

    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        result = self._request({"op": "read", "path": path, "buffer": buf.to_dict()},
                               buf.lw_per_group, image=(buf.groups, buf.lw_per_group))
        self._count_port(path, result["port_beats"])
        return result["image"], result["cycles"]

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        self._track(buf)
        result = self._request({"op": "write", "path": path, "buffer": buf.to_dict()},
                               buf.lw_per_group, rows=image)
        self._count_port(path, result["port_beats"])
        return int(result["cycles"])

    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        self._track(dst)
        result = self._request({"op": "convert", "descriptor": descriptor.to_dict(),
                                "src": src.to_dict(), "dst": dst.to_dict()},
                               descriptor.read_lw + descriptor.write_lw)
        counters = result["counters"]
        self.last_conversion = {**counters, "cycles": result["cycles"],
                                "program_cycles": result["program_cycles"]}
        self._measured["converter"] = ((counters["beats_read"] + counters["beats_written"])
                                       * self.config.lw_bytes)
        return int(result["cycles"])

    def _bind(self, function: str, io: str, buf: Buffer) -> int:
        try:
            slot = self.slots.slot(function, io, live=set(self.descriptors))
        except RuntimeError as exc:
            raise DeviceError(str(exc)) from None
        return int(self._request({"op": "bind", "slot": slot, "buffer": buf.to_dict()})["cycles"])

    def _launch(self, command: Launch, result: CommandResult) -> None:
        """Launch, reading every input's address back from its descriptor register."""
        program = self.programs.get(command.program)
        bindings = dict(command.bindings)
        for name in program.inputs if program is not None else ():
            slot = self.slots.lookup(command.program, name)
            if slot is None or name not in bindings:
                continue
            desc = self._request({"op": "lookup", "slot": slot})["descriptor"]
            given = bindings[name]
            if desc is None:
                raise DeviceError(f"Launch of {command.program!r}: the descriptor register of "
                                  f"input {name!r} (slot {slot}) is empty")
            bindings[name] = Buffer(given.id, **desc)
            if bindings[name] != given:
                raise DeviceError(
                    f"Launch of {command.program!r}: descriptor register {slot} of input "
                    f"{name!r} holds {bindings[name]}, but the runtime bound {given}")
        super()._launch(Launch(command.program, bindings, command.outputs), result)

    # -- inspection -------------------------------------------------------------------------

    def _peek_rows(self, group: int, address: int, count: int) -> np.ndarray:
        return self._request({"op": "peek", "group": group, "address": address,
                              "count": count}, count, image=(count,))["image"]

    def peek(self, buf: Buffer) -> np.ndarray:
        return np.stack([self._peek_rows(buf.group + i, buf.address, buf.lw_per_group)
                         for i in range(buf.groups)])

    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        self._track(buf)
        for i in range(buf.groups):
            self._request({"op": "poke", "group": buf.group + i, "address": buf.address,
                           "count": buf.lw_per_group}, buf.lw_per_group, rows=image[i])

    def dram_snapshot(self) -> DramSnapshot:
        """Every Group's non-zero pages.

        Only the part of the window the session ever wrote (its high-water mark) is read.
        """
        out = []
        for g, end in enumerate(self._high_water):
            pages: dict[int, np.ndarray] = {}
            if end:
                words = self._peek_rows(g, 0, end)
                padded = np.zeros(math.ceil(end / PAGE_LW) * PAGE_LW, dtype=np.uint64)
                padded[:end] = words
                for p in range(len(padded) // PAGE_LW):
                    page = padded[p * PAGE_LW:(p + 1) * PAGE_LW]
                    if page.any():
                        pages[p] = page.copy()
            out.append(pages)
        return out

    def counters(self) -> dict[str, int]:
        """The converter's counters and every controller's CSR counters, per path."""
        return dict(self._request({"op": "counters"})["counters"])

    def simulator_profile(self) -> dict[str, float]:
        """Where the simulator's side spent its time so far, summed over the session (empty
        before the simulator starts): ``ops``; on the cocotb simulators also ``op_s`` (executing
        operations), ``sim_s`` / ``sim_cpu_s`` (wall / process seconds of that spent awaiting
        the simulator: the model, or Icarus, running), ``waits`` (how many awaits) and
        ``protocol_s`` (reading and writing the JSON lines). ``bench/bench_cosim.py`` prints
        the split."""
        if self._session is None:
            return {}
        return dict(self._request({"op": "profile"})["profile"])

    def host_port_beats(self) -> int:
        """Read plus write beats of the host port over all controllers (CSR counters)."""
        counters = self.counters()
        return sum(v for k, v in counters.items()
                   if ".host." in k and k.endswith("_beats"))

    def close(self) -> None:
        if self.closed:
            return
        session, self._session = self._session, None
        super().close()
        if session is not None:
            session.close()
            if self._progress is not None:
                sys.stderr.write("\n")
        if self.vcd_path is not None and self.vcd_path.exists():
            self.gtkw_path = write_gtkw(self.vcd_path, self.marks)
            self._say(f"waveforms: {self.vcd_path} (open {self.gtkw_path} in GTKWave)")

    def __del__(self) -> None:
        try:
            if not self.closed and self._session is not None:
                self._session.close(timeout=5.0)
        except Exception:
            pass


def _moved_buffer(command: Command) -> Buffer | None:
    """The buffer the command track names: what a command writes or reads (a Convert's
    destination, a Launch's first output, a Bind's buffer)."""
    if isinstance(command, (HostWrite, HostRead, Bind)):
        return command.buffer
    if isinstance(command, Convert):
        return command.dst
    if isinstance(command, Launch) and command.outputs:
        return next(iter(command.outputs.values()))
    return None
