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
        if device.closed or device._retired:
            device.before_command()
        if not device.allocator.is_live(buf):
            device._check_buffer(buf)  # raises
        tensor, cycles = device._read_tensor(buf, layout)
    return tensor, CommandResult(f"HostRead {buf}", {"host": buf.nbytes, "compute": 0,
                                                      "converter": 0}, cycles)


class CallReplay:
    """The HostWrites and the Launch of one compiled call, on one device.

    Parameters
    ----------
    device : DramDevice
        The device (its hooks do the work). It must write host tensors as replayed
        HostWrites, ``_write_planned(facts, tensor)`` returning the cycles, with
        ``_write_facts(buf, layout)`` worked out once per write; and run a replayed Launch,
        ``_run_planned(program, bindings, stores, memo)``, what ``_run_program`` does with
        its fixed facts kept in ``memo``.
    program : LoadedProgram
        The program the Launch runs, as loaded now.
    writes : sequence of (Buffer, Layout)
        The buffer each host tensor is written into, in its layout, in call order.
    """

    def __init__(self, device: DramDevice, program: LoadedProgram,
                 writes: Sequence[tuple[Buffer, Layout]]):
        self.device = device
        self.program = program
        facts = device._write_facts  # type: ignore[attr-defined]
        self._writes = tuple((buf, facts(buf, layout)) for buf, layout in writes)
        # Each write's figures as last recorded (a record keeps figures, never changes them,
        # so calls of the same figures share one), made again when the cycles differ.
        self._results = [CommandResult(f"HostWrite {buf}", {"host": buf.nbytes, "compute": 0,
                                                            "converter": 0}, -1)
                         for buf, _ in writes]
        # The Launch's figures as last recorded, by (reads, stores) bound.
        self._launches: dict[tuple[int, int], CommandResult] = {}
        # What the device works out once for this call's Launch (``_run_planned``).
        self._memo: dict[str, Any] = {}

    def write(self, tensors: Sequence[Any], add: Callable[[CommandResult], None]) -> None:
        """``HostWrite`` each of ``tensors`` (of its layout's shape and dtype, values checked)
        into its buffer, adding each command's figures with ``add`` as it completes. Called
        under the device lock (the caller holds it across the call's commands)."""
        device = self.device
        allocator, results = device.allocator, self._results
        lives, pending = allocator.by_id, allocator.pending
        write = device._write_planned  # type: ignore[attr-defined]
        for index, ((buf, facts), tensor) in enumerate(zip(self._writes, tensors, strict=True)):
            if device.closed or device._retired:
                device.before_command()
            if (pending or lives.get(buf.id) is not buf) and not allocator.is_live(buf):
                device._check_buffer(buf)  # raises
            cycles = write(facts, tensor)
            result = results[index]
            if result.cycles != cycles:
                result = results[index] = CommandResult(result.command, dict(result.bytes),
                                                        cycles)
            add(result)

    def launch(self, bindings: Mapping[str, Buffer], stores: Mapping[str, Buffer],
               add: Callable[[CommandResult], None]) -> None:
        """``Launch`` the program with ``bindings`` into ``stores`` (every read and output
        named), adding its figures with ``add`` once it completes. Called under the device
        lock."""
        device = self.device
        program = self.program
        if device.closed or device._retired:
            device.before_command()
        if device.programs.get(program.name) is not program:
            # Unloaded or loaded again since: the command says what it finds.
            add(device._execute(Launch(program.name, dict(bindings), dict(stores))))
            return
        cycles, nbytes = device._run_planned(  # type: ignore[attr-defined]
            program, bindings, stores, self._memo)
        sizes = (len(bindings), len(stores))
        result = self._launches.get(sizes)
        if result is None or result.cycles != cycles or result.bytes["compute"] != nbytes:
            summary = (f"Launch {program.name} ({sizes[0]} in, {sizes[1]} out)"
                       if result is None else result.command)
            result = self._launches[sizes] = CommandResult(
                summary, {"host": 0, "compute": nbytes, "converter": 0}, cycles)
        add(result)
