"""Device base classes: what every backend declares, and the shared policy of one with DRAM.

A backend is one :class:`Device` subclass in one file, named by a row of the device table
(:data:`mlsdk.device.registry.DEVICES`). It declares its capabilities (:attr:`Device.has_memory`,
:attr:`Device.cycles_kind`), from which the front end picks how to run compiled functions on it;
the device layer never builds front-end objects. A backend with device memory subclasses
:class:`DramDevice` and implements the abstract hooks that touch its memory system:
``_dram_read``, ``_dram_write``, ``_convert``, ``_poke``, ``peek`` and ``dram_snapshot``. The
documented default hooks (``_bind``, ``_compute_cycles``, ``counters``, ``create``,
``_load_input``, ``_load_reads``, ``_before_run``, ``_dram_store``, ``_store_outputs``,
``_host_write``, ``_read_tensor``)
may be overridden. Everything else (allocation, the command stream, Launch as loads ->
compute -> stores, per-path byte counting, the record of what ran) is shared, so two
backends given the same commands are comparable word for word. The host reference
(``pfvm:cpu``) has no device memory: it subclasses :class:`Device` alone.

Threads: :attr:`Device.lock` (a re-entrant :class:`DeviceLock`) guards the device. Every
command, allocation and program (un)load takes it, and the front end holds it across a whole
call (staging the inputs, Launch, handing out the outputs), so calls from several threads never
interleave. Finalizers (a collected TensorProxy or CompiledFunction) never wait for it: they
queue what they give back, and the device takes it back at its next operation.
"""

from __future__ import annotations

import collections
import gc
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor, Layout, from_device, to_device

from ..errors import DeviceError, DeviceMemoryError
from .allocator import Allocator
from .commands import (
    Bind,
    Buffer,
    Command,
    CommandResult,
    Convert,
    HostRead,
    HostWrite,
    Launch,
)

__all__ = ["Device", "DramDevice", "DeviceLock", "LoadedProgram", "PAGE_LW", "DramSnapshot",
           "BIND_CYCLES", "compute_cycles", "converter_bytes"]

#: LWs per page of a DRAM snapshot (32 KiB pages; also the functional model's storage page).
PAGE_LW = 4096

#: Per Group, its non-zero pages by page number (see :meth:`Device.dram_snapshot`).
DramSnapshot = list[dict[int, np.ndarray]]

#: Cycles of a Bind by default: one descriptor-register write.
BIND_CYCLES = 1


def compute_cycles(config: ArchConfig, flops: int) -> int:
    """Cycles the PE array computes ``flops`` for: ``flops / (PEs x flops per cycle)``,
    rounded up (the PE array is modeled functionally on every backend)."""
    return math.ceil(flops / (config.pes * config.pe_flops_per_cycle))


def converter_bytes(config: ArchConfig, descriptor: ConversionDescriptor) -> int:
    """Bytes the layout converter moves for ``descriptor``: its beats read plus beats
    written, times the LW's bytes, counted from the converter program
    (:func:`mncore_hdl.converter.timing.converter_beats`)."""
    from mncore_hdl.converter.program import compile_program
    from mncore_hdl.converter.timing import converter_beats

    read, written = converter_beats(compile_program(descriptor, config))
    return (read + written) * config.lw_bytes


@dataclass
class LoadedProgram:
    """What a device needs to Launch a program: its graph and the layout of every bound name.

    ``layouts`` covers inputs and constants, ``output_layouts`` the outputs (a separate
    namespace: an output may share an input's name).
    """

    name: str
    graph: Any
    layouts: dict[str, Layout]
    output_layouts: dict[str, Layout]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    constants: tuple[str, ...]
    flops: int = 0
    run: Any = field(default=None, repr=False)
    #: Inputs and constants ``run`` never reads (it takes them or not): a Launch still loads
    #: them (their cycles and bytes count), but a backend may skip decoding them.
    unread: frozenset[str] = frozenset()
    #: What a Launch loads, in order: the inputs, then the constants.
    reads: tuple[str, ...] = field(init=False, repr=False)

    #: :attr:`reads` and :attr:`outputs` as sets: what a Launch must bind, checked at once.
    needed: tuple[frozenset[str], frozenset[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.reads = tuple(self.inputs) + tuple(self.constants)
        self.needed = (frozenset(self.reads), frozenset(self.outputs))


class DeviceLock:
    """A re-entrant lock that knows whether it is held: the device's one lock.

    ``with lock:`` blocks until this thread holds it (nesting is allowed).
    :meth:`acquire_if_idle` never blocks, and takes the lock only when no thread, the calling
    one included, is inside it: what a finalizer needs, since it may run in the middle of a
    device operation of its own thread.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0

    def __enter__(self) -> DeviceLock:
        self._lock.acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        self._lock.release()

    def acquire_if_idle(self) -> bool:
        """Take the lock if nobody holds it; release it with ``__exit__``."""
        if not self._lock.acquire(blocking=False):
            return False
        if self._depth:  # this thread is already inside: not a safe point
            self._lock.release()
            return False
        self._depth = 1
        return True


class Device:
    """A backend, as the front end sees it: its chip, its name, its lock and what it can do.

    Parameters
    ----------
    config : ArchConfig
        The chip being modeled.
    name : str
        The device string that selected this backend.
    """

    #: "modeled" (analytic), "measured" (RTL) or "none".
    cycles_kind: ClassVar[str] = "none"
    #: Whether the backend has device memory and executes the command stream
    #: (a :class:`DramDevice`); the host reference has none and runs calls on the host.
    has_memory: ClassVar[bool] = False

    def __init__(self, config: ArchConfig, name: str):
        self.config = config
        self.name = name
        #: The VCD the backend writes of its session, once written; None when it writes none.
        self.vcd_path: Path | None = None
        self.closed = False
        #: The device's lock (see the module docstring).
        self.lock = DeviceLock()

    @classmethod
    def create(cls, config: ArchConfig, name: str, options: Mapping[str, str]) -> Device:
        """The backend for device string ``name`` (default hook: options are not used).

        ``options`` are the device string's ``?key=value`` pairs, already checked against the
        table (only a row that takes options receives any).
        """
        return cls(config, name)

    def counters(self) -> dict[str, int]:
        """Backend counters (default hook: none; the RTL backends return the converter's and
        every controller's counters)."""
        return {}

    def close(self) -> None:
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise DeviceError(f"Device {self.name!r} is closed (its Context has ended)")


class DramDevice(Device, ABC):
    """A modeled MN-Core 2 with device memory, executing the command stream.

    Takes the parameters of :class:`Device`.
    """

    has_memory = True
    #: Whether the backend executes commands as this class does (no ``execute`` of its own),
    #: so the front end may replay them without building them (:mod:`.replay`).
    replays: ClassVar[bool] = False

    def __init__(self, config: ArchConfig, name: str):
        super().__init__(config, name)
        self.allocator = Allocator(config.groups, config.dram_lw_per_group)
        self.programs: dict[str, LoadedProgram] = {}
        #: The input descriptor table: (function, io) -> the buffer Launch reads it from.
        self.descriptors: dict[tuple[str, str], Buffer] = {}
        # Programs (and their buffers) of collected functions, to unload at a safe point.
        self._retired: collections.deque[tuple[str, tuple[Buffer, ...]]] = collections.deque()
        # Converter bytes by descriptor (see _converter_moved).
        self._moved: dict[ConversionDescriptor, int] = {}

    # -- buffers and programs ---------------------------------------------------------------

    def allocate(self, layout: Layout, owner: str = "unowned") -> Buffer:
        """A buffer for ``layout``; ``owner`` names its holder in out-of-memory errors.

        When DRAM is full, garbage is collected once (so unreachable functions and
        TensorProxies give their buffers back) before DeviceMemoryError is raised.
        """
        with self.lock:
            self._check_open()
            self._unload_retired()
            try:
                return self.allocator.allocate(layout.groups, layout.lw_per_group, owner)
            except DeviceMemoryError:
                gc.collect()
                self._unload_retired()
                return self.allocator.allocate(layout.groups, layout.lw_per_group, owner)

    def free(self, buf: Buffer) -> None:
        with self.lock:
            if not self.closed and self.allocator.is_live(buf):
                self.allocator.free(buf)

    def release(self, buf: Buffer) -> None:
        """Give ``buf`` back from a finalizer: never blocks, and does nothing once closed."""
        if not self.closed:
            self.allocator.release(buf)

    def is_live(self, buf: Buffer) -> bool:
        return not self.closed and self.allocator.is_live(buf)

    def load_program(self, program: LoadedProgram) -> None:
        with self.lock:
            self._check_open()
            self._unload_retired()
            if program.name in self.programs:
                raise DeviceError(f"A program named {program.name!r} is already loaded")
            self.programs[program.name] = program

    def unload_program(self, name: str, buffers: tuple[Buffer, ...] = ()) -> None:
        """Forget program ``name`` and its input descriptors, and free ``buffers`` (its own
        inputs and constants). Unknown names and already freed buffers are ignored."""
        with self.lock:
            if self.closed:
                return
            self.programs.pop(name, None)
            for key in [k for k in self.descriptors if k[0] == name]:
                del self.descriptors[key]
            for buf in buffers:
                if self.allocator.is_live(buf):
                    self.allocator.free(buf)

    def retire_program(self, name: str, buffers: tuple[Buffer, ...]) -> None:
        """:meth:`unload_program` from a finalizer: never blocks; done now when the device
        is idle, else at the start of its next operation."""
        if self.closed:
            return
        self._retired.append((name, buffers))
        if self.lock.acquire_if_idle():
            try:
                self._unload_retired()
            finally:
                self.lock.__exit__()

    def _unload_retired(self) -> None:
        while self._retired:
            self.unload_program(*self._retired.popleft())

    # -- the command stream -----------------------------------------------------------------

    def execute(self, command: Command) -> CommandResult:
        """Execute one command and say what it cost."""
        with self.lock:
            self.before_command()
            return self._execute(command)

    def before_command(self) -> None:
        """What :meth:`execute` does before each command, under the lock: raise once the
        device is closed, and unload the programs finalizers retired since."""
        if self.closed:
            self._check_open()  # raises
        if self._retired:
            self._unload_retired()

    def _execute(self, command: Command) -> CommandResult:
        result = CommandResult(command.summary())
        if isinstance(command, HostWrite):
            self._check_buffer(command.buffer)
            result.cycles = self._host_write(command)
            result.bytes["host"] = command.buffer.nbytes
        elif isinstance(command, HostRead):
            self._check_buffer(command.buffer)
            if command.layout is None:
                result.data, result.cycles = self._dram_read("host", command.buffer)
            else:
                result.tensor, result.cycles = self._read_tensor(command.buffer, command.layout)
            result.bytes["host"] = command.buffer.nbytes
        elif isinstance(command, Convert):
            self._check_buffer(command.src)
            self._check_buffer(command.dst)
            result.cycles = self._convert(command.descriptor, command.src, command.dst)
            result.bytes["converter"] = self._converter_moved(command.descriptor)
        elif isinstance(command, Launch):
            self._launch(command, result)
        elif isinstance(command, Bind):
            self._check_buffer(command.buffer)
            result.cycles = self._bind(command.function, command.io, command.buffer)
            self.descriptors[(command.function, command.io)] = command.buffer
        else:
            raise TypeError(f"Expected a device command, not {command!r}")
        return result

    def _converter_moved(self, descriptor: ConversionDescriptor) -> int:
        """:meth:`_converter_bytes` of ``descriptor``, counted once per distinct descriptor
        (calls repeat the same Convert; equal descriptors move equal bytes)."""
        moved = self._moved.get(descriptor)
        if moved is None:
            if len(self._moved) >= 256:
                self._moved.clear()
            moved = self._moved[descriptor] = self._converter_bytes(descriptor)
        return moved

    def _launch(self, command: Launch, result: CommandResult) -> None:
        program = self.programs.get(command.program)
        if program is None:
            raise DeviceError(f"Launch of {command.program!r}: no such program is loaded")
        bindings, stores = command.bindings, command.outputs
        reads, writes = program.needed
        if not (bindings.keys() >= reads and stores.keys() >= writes):
            missing = [n for n in program.reads if n not in bindings]
            missing += [f"output {n}" for n in program.outputs if n not in stores]
            raise DeviceError(f"Launch of {command.program!r}: no buffer bound for {missing}")
        cycles, nbytes = self._run_program(program, bindings, stores)
        result.cycles += cycles
        result.bytes["compute"] += nbytes

    def _run_program(self, program: LoadedProgram, bindings: Mapping[str, Buffer],
                     stores: Mapping[str, Buffer]) -> tuple[int, int]:
        """A Launch of ``program`` (loaded, its bindings and stores checked complete): loads,
        compute, stores; returns its cycles and compute-port bytes."""
        values, cycles, nbytes = self._load_reads(program, bindings)
        self._before_run(program, bindings, stores)
        outputs = self._own_outputs(program.run(values))
        cycles += self._compute_cycles(program)
        stored, moved = self._store_outputs(program, stores, outputs)
        return cycles + stored, nbytes + moved

    def _store_outputs(self, program: LoadedProgram, stores: Mapping[str, Buffer],
                       outputs: Mapping[str, Any]) -> tuple[int, int]:
        """A Launch's stores: each output of ``program`` into its buffer (checked live), and
        the cycles and compute-port bytes they took (default hook: :meth:`_dram_store` of
        each, in output order)."""
        cycles = nbytes = 0
        layouts, check, store = program.output_layouts, self._check_buffer, self._dram_store
        for name in program.outputs:
            buf = stores[name]
            check(buf)
            cycles += store("compute", buf, outputs[name], layouts[name])
            nbytes += buf.nbytes
        return cycles, nbytes

    def _load_reads(self, program: LoadedProgram, bindings: Mapping[str, Buffer]
                    ) -> tuple[dict[str, Any], int, int]:
        """A Launch's loads: each input and constant of ``program`` from its bound buffer
        (checked live), and the cycles and compute-port bytes they took (default hook:
        :meth:`_load_input` of each, in :attr:`LoadedProgram.reads` order)."""
        values = {}
        cycles = nbytes = 0
        layouts, check, load = program.layouts, self._check_buffer, self._load_input
        for name in program.reads:
            buf = bindings[name]
            check(buf)
            values[name], taken = load(buf, layouts[name])
            cycles += taken
            nbytes += buf.nbytes
        return values, cycles, nbytes

    # -- hooks ------------------------------------------------------------------------------

    @abstractmethod
    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        """Read ``buf``'s image through port ``path``; return it and the cycles taken."""

    @abstractmethod
    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        """Write ``image`` into ``buf`` through port ``path``; return the cycles taken."""

    def _host_write(self, command: HostWrite) -> int:
        """Execute a HostWrite (its buffer checked live); return the cycles taken (default
        hook: :meth:`_dram_write` of its image through the host port)."""
        return self._dram_write("host", command.buffer, command.data)

    def _read_tensor(self, buf: Buffer, layout: Layout) -> tuple[Any, int]:
        """A HostRead of ``buf`` decoded from ``layout``: a tensor the caller owns, and the
        cycles taken (default hook: :meth:`_dram_read`, then :func:`from_device`)."""
        image, cycles = self._dram_read("host", buf)
        return from_device(image, layout), cycles

    def _load_input(self, buf: Buffer, layout: Layout) -> tuple[Any, int]:
        """Read a Launch's input or constant ``buf`` through the compute port and decode it
        from ``layout``; return the tensor and the cycles taken (default hook:
        :meth:`_dram_read`, then :func:`from_device`). The program only reads its inputs, so
        the tensor may be a view of the image."""
        image, cycles = self._dram_read("compute", buf)
        return from_device(image, layout, copy=False), cycles

    def _before_run(self, program: LoadedProgram, bindings: Mapping[str, Buffer],
                    stores: Mapping[str, Buffer]) -> None:
        """A Launch's loads are done and its program is about to run, then store into
        ``stores`` (default hook: nothing)."""

    def _own_outputs(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """A Launch's outputs as the program computed them, made safe to store one after
        another (default hook: as they are). An output may be a view of an input the Launch
        read (a state update equal to another state's old value); a backend whose loaded
        inputs are views of its live DRAM copies such outputs here, before a store overwrites
        what they view."""
        return outputs

    def _dram_store(self, path: str, buf: Buffer, tensor: Any, layout: Layout) -> int:
        """Lay ``tensor`` out in ``layout`` into ``buf`` through ``path``; return the cycles
        (default hook: :func:`to_device`, then :meth:`_dram_write`)."""
        return self._dram_write(path, buf, to_device(tensor, layout))

    @abstractmethod
    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        """Run the layout converter from ``src`` to ``dst``; return the cycles taken."""

    def _converter_bytes(self, descriptor: ConversionDescriptor) -> int:
        """Bytes the layout converter moves for ``descriptor``: its beats read plus beats
        written, times the LW's bytes, counted from the converter program
        (:func:`mncore_hdl.converter.timing.converter_beats`). The RTL backends replace it with
        the converter's own counters, which end at the same figure."""
        return converter_bytes(self.config, descriptor)

    def _bind(self, function: str, io: str, buf: Buffer) -> int:
        """Write the input descriptor register; return the cycles taken (default hook: one
        register write, :data:`BIND_CYCLES`)."""
        return BIND_CYCLES

    def _compute_cycles(self, program: LoadedProgram) -> int:
        """Cycles the PE array computes for, between its loads and its stores (default hook:
        the PE array is modeled functionally on every backend, so ``flops / (PEs x flops per
        cycle)``, rounded up: :func:`compute_cycles`)."""
        return compute_cycles(self.config, program.flops)

    # -- inspection -------------------------------------------------------------------------

    @abstractmethod
    def peek(self, buf: Buffer) -> np.ndarray:
        """The buffer's image, read without going through any port (for tests and debugging)."""

    def poke(self, buf: Buffer, image: np.ndarray) -> None:
        """Store ``image`` into the buffer without going through any port and without spending
        a cycle (the back door benches use to stage a workload)."""
        self._check_open()
        self._check_buffer(buf)
        want = (buf.groups, buf.lw_per_group)
        if (not isinstance(image, np.ndarray) or image.shape != want
                or image.dtype != np.uint64):
            given = (f"a {image.dtype} array of shape {image.shape}"
                     if isinstance(image, np.ndarray) else type(image).__name__)
            raise ValueError(f"poke into {buf} takes a uint64 array of shape {want}, not "
                             f"{given}")
        self._poke(buf, np.ascontiguousarray(image))

    @abstractmethod
    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        """Store ``image`` (checked by :meth:`poke`) into ``buf``, spending no cycle."""

    @abstractmethod
    def dram_snapshot(self) -> DramSnapshot:
        """Every Group's non-zero pages of :data:`PAGE_LW` LWs, by page number (to compare
        the DRAM of two backends)."""

    def _check_buffer(self, buf: Buffer) -> None:
        if not self.allocator.is_live(buf):
            raise DeviceError(f"Buffer {buf} is not allocated on device {self.name!r}")
