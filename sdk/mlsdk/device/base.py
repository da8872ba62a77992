"""The device base class: the shared policy every backend runs, and the hooks a backend fills in.

A backend subclasses :class:`Device` and implements four hooks that touch its memory system:
``_dram_read``, ``_dram_write``, ``_convert`` and ``_bind``. Everything else (allocation, the
command stream, Launch as loads -> compute -> stores, per-path byte counting, the record of what
ran) is shared, so two backends given the same commands are comparable word for word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor, Layout, from_device, to_device

from ..errors import DeviceError
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

__all__ = ["Device", "LoadedProgram"]


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


class Device:
    """A modeled MN-Core 2 executing the command stream.

    Parameters
    ----------
    config : ArchConfig
        The chip being modeled.
    name : str
        The device string that selected this backend.
    """

    #: "modeled" (analytic), "measured" (RTL) or "none".
    cycles_kind = "none"

    def __init__(self, config: ArchConfig, name: str):
        self.config = config
        self.name = name
        self.allocator = Allocator(config.groups, config.dram_lw_per_group)
        self.programs: dict[str, LoadedProgram] = {}
        #: The input descriptor table: (function, io) -> the buffer Launch reads it from.
        self.descriptors: dict[tuple[str, str], Buffer] = {}
        self.closed = False

    # -- buffers and programs ---------------------------------------------------------------

    def allocate(self, layout: Layout) -> Buffer:
        self._check_open()
        return self.allocator.allocate(layout.groups, layout.lw_per_group)

    def free(self, buf: Buffer) -> None:
        if not self.closed and self.allocator.is_live(buf):
            self.allocator.free(buf)

    def is_live(self, buf: Buffer) -> bool:
        return not self.closed and self.allocator.is_live(buf)

    def load_program(self, program: LoadedProgram) -> None:
        self._check_open()
        self.programs[program.name] = program

    def unload_program(self, name: str) -> None:
        self.programs.pop(name, None)
        for key in [k for k in self.descriptors if k[0] == name]:
            del self.descriptors[key]

    # -- the command stream -----------------------------------------------------------------

    def execute(self, command: Command) -> CommandResult:
        """Execute one command and say what it cost."""
        self._check_open()
        result = CommandResult(command.summary())
        if isinstance(command, HostWrite):
            self._check_buffer(command.buffer)
            result.cycles = self._dram_write("host", command.buffer, command.data)
            result.bytes["host"] = command.buffer.nbytes
        elif isinstance(command, HostRead):
            self._check_buffer(command.buffer)
            result.data, result.cycles = self._dram_read("host", command.buffer)
            result.bytes["host"] = command.buffer.nbytes
        elif isinstance(command, Convert):
            self._check_buffer(command.src)
            self._check_buffer(command.dst)
            descriptor = ConversionDescriptor.from_dict(command.descriptor)
            result.cycles = self._convert(descriptor, command.src, command.dst)
            result.bytes["converter"] = command.src.nbytes + command.dst.nbytes
        elif isinstance(command, Launch):
            self._launch(command, result)
        elif isinstance(command, Bind):
            self._check_buffer(command.buffer)
            result.cycles = self._bind(command.function, command.io, command.buffer)
            self.descriptors[(command.function, command.io)] = command.buffer
        else:
            raise TypeError(f"Expected a device command, not {command!r}")
        return result

    def _launch(self, command: Launch, result: CommandResult) -> None:
        program = self.programs.get(command.program)
        if program is None:
            raise DeviceError(f"Launch of {command.program!r}: no such program is loaded")
        missing = [n for n in program.inputs + program.constants if n not in command.bindings]
        missing += [f"output {n}" for n in program.outputs if n not in command.outputs]
        if missing:
            raise DeviceError(f"Launch of {command.program!r}: no buffer bound for {missing}")
        values = {}
        for name in program.inputs + program.constants:
            buf = command.bindings[name]
            self._check_buffer(buf)
            image, cycles = self._dram_read("compute", buf)
            result.cycles += cycles
            result.bytes["compute"] += buf.nbytes
            # The program only reads its inputs: a view of the image will do.
            values[name] = from_device(image, program.layouts[name], copy=False)
        outputs = program.run(values)
        result.cycles += self._compute_cycles(program)
        for name in program.outputs:
            buf = command.outputs[name]
            self._check_buffer(buf)
            result.cycles += self._dram_store("compute", buf, outputs[name],
                                              program.output_layouts[name])
            result.bytes["compute"] += buf.nbytes

    # -- hooks ------------------------------------------------------------------------------

    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        """Read ``buf``'s image through port ``path``; return it and the cycles taken."""
        raise NotImplementedError

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        """Write ``image`` into ``buf`` through port ``path``; return the cycles taken."""
        raise NotImplementedError

    def _dram_store(self, path: str, buf: Buffer, tensor: Any, layout: Layout) -> int:
        """Lay ``tensor`` out in ``layout`` into ``buf`` through ``path``; return the cycles."""
        return self._dram_write(path, buf, to_device(tensor, layout))

    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        """Run the layout converter from ``src`` to ``dst``; return the cycles taken."""
        raise NotImplementedError

    def _bind(self, function: str, io: str, buf: Buffer) -> int:
        """Write the input descriptor register; return the cycles taken."""
        return 1

    def _compute_cycles(self, program: LoadedProgram) -> int:
        """Cycles the PE array computes for (between its loads and its stores)."""
        return 0

    # -- inspection -------------------------------------------------------------------------

    def peek(self, buf: Buffer) -> np.ndarray:
        """The buffer's image, read without going through any port (for tests and debugging)."""
        raise NotImplementedError

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

    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        raise NotImplementedError

    def counters(self) -> dict[str, int]:
        """Backend counters (e.g. the RTL converter's beat counters); empty if none."""
        return {}

    def close(self) -> None:
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise DeviceError(f"Device {self.name!r} is closed (its Context has ended)")

    def _check_buffer(self, buf: Buffer) -> None:
        if not self.allocator.is_live(buf):
            raise DeviceError(f"Buffer {buf} is not allocated on device {self.name!r}")
