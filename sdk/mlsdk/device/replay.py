"""A compiled call's device commands replayed: the HostWrites of its host inputs and its Launch,
with what does not depend on the values worked out once.

A call of a compiled function whose inputs are host tensors, each written into the function's
own buffer, is the same few commands every time: a HostWrite per input, then a Launch of the
same program with the same bindings into fresh output buffers. Executed one by one, each
command is built, dispatched, checked and summarised again (``DramDevice.execute``); a
:class:`CallReplay` runs the same steps in the same order, on the same hooks, with the same
checks, and hands the same :class:`~.commands.CommandResult` figures to the caller's record,
without building or dispatching the commands. What it settles once: each write's buffer,
layout, summary and bytes, and the Launch's summary. What it still does per call is all the
value work and every check whose answer another call, a free, a write or an unload could
change: the device open, retired programs unloaded, each buffer live, the program still the one
loaded under its name (else the Launch runs as a command, which says what is wrong), and every
load, store and cycle figure through the device's own hooks.

Only a backend whose commands are the base class's (the functional model:
:attr:`~.base.DramDevice.replays`) has its calls replayed (the front end makes their
:class:`CallReplay`) and its HostReads of a tensor too (:func:`replay_read`); the RTL backends
execute each command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mncore_hdl.layout import Layout

from .base import DramDevice, LoadedProgram
from .commands import Buffer, CommandResult, Launch

__all__ = ["CallReplay", "replay_read"]


def replay_read(device: DramDevice, buf: Buffer, layout: Layout) -> tuple[Any, CommandResult]:
    """What executing ``HostRead(buf, layout)`` does on ``device`` (a backend that replays:
    :attr:`~.base.DramDevice.replays`), without building or dispatching the command: the
    tensor decoded, and the command's figures."""
    with device.lock:
        device.before_command()
        device._check_buffer(buf)
        tensor, cycles = device._read_tensor(buf, layout)
    return tensor, CommandResult(f"HostRead {buf}", {"host": buf.nbytes, "compute": 0,
                                                      "converter": 0}, cycles)


class CallReplay:
    """The HostWrites and the Launch of one compiled call, on one device.

    Parameters
    ----------
    device : DramDevice
        The device (its hooks do the work; it must write host tensors:
        ``_write_host_tensor``).
    program : LoadedProgram
        The program the Launch runs, as loaded now.
    writes : sequence of (Buffer, Layout)
        The buffer each host tensor is written into, in its layout, in call order.
    """

    def __init__(self, device: DramDevice, program: LoadedProgram,
                 writes: Sequence[tuple[Buffer, Layout]]):
        self.device = device
        self.program = program
        self._writes = tuple((buf, layout, f"HostWrite {buf}", buf.nbytes)
                             for buf, layout in writes)
        self._summaries: dict[tuple[int, int], str] = {}

    def write(self, tensors: Sequence[Any], add: Callable[[CommandResult], None]) -> None:
        """``HostWrite`` each of ``tensors`` (of its layout's shape and dtype, values checked)
        into its buffer, adding each command's figures with ``add`` as it completes."""
        device = self.device
        write = device._write_host_tensor  # type: ignore[attr-defined]
        for (buf, layout, summary, nbytes), tensor in zip(self._writes, tensors, strict=True):
            with device.lock:
                device.before_command()
                device._check_buffer(buf)
                cycles = write(buf, tensor, layout)
            add(CommandResult(summary, {"host": nbytes, "compute": 0, "converter": 0}, cycles))

    def launch(self, bindings: Mapping[str, Buffer], stores: Mapping[str, Buffer],
               add: Callable[[CommandResult], None]) -> None:
        """``Launch`` the program with ``bindings`` into ``stores`` (every read and output
        named), adding its figures with ``add`` once it completes."""
        device = self.device
        program = self.program
        with device.lock:
            device.before_command()
            if device.programs.get(program.name) is not program:
                # Unloaded or loaded again since: the command says what it finds.
                add(device._execute(Launch(program.name, dict(bindings), dict(stores))))
                return
            cycles, nbytes = device._run_program(program, bindings, stores)
        sizes = (len(bindings), len(stores))
        summary = self._summaries.get(sizes)
        if summary is None:
            summary = self._summaries[sizes] = (f"Launch {program.name} ({sizes[0]} in, "
                                                f"{sizes[1]} out)")
        add(CommandResult(summary, {"host": 0, "compute": nbytes, "converter": 0}, cycles))
