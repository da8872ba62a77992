"""``pfvm:cpu``: the host reference. Compiled functions run as plain torch eager on the host.

There is no device model behind it: a call runs the function's graph with the IR interpreter on
host tensors, issues no device command, and returns TensorProxies that hold their host tensor
(``buffer`` is None). Its report has one ``call`` record per call, without commands, and its
cycles are of kind ``none``. It is what the modeled backends' results are compared with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch
from mncore_compiler.interpreter import interpret
from mncore_hdl.layout import ConversionDescriptor, Layout

from ..compiled import CompiledFunction
from ..errors import DeviceError, InputError, IOSpecMismatchError
from ..proxy import TensorProxy
from .base import Device, DramSnapshot
from .commands import Buffer, Command, CommandResult

if TYPE_CHECKING:
    from mncore_compiler.program import DeviceProgram

    from ..context import Context

__all__ = ["ReferenceDevice", "HostFunction"]


class HostFunction(CompiledFunction):
    """A compiled function on the host reference: nothing is loaded, and each call runs the
    graph eagerly on host tensors.

    A TensorProxy input is accepted when its shape and dtype match the input's (layouts do not
    exist on the host, so there is nothing to relocate or convert, and ``bindings`` stays
    empty).
    """

    def _load(self) -> None:
        """Nothing to allocate, upload or bind: the graph runs on the host."""

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        values = {}
        for name, spec in self.input_specs.items():
            value = inputs[name]
            if isinstance(value, TensorProxy):
                value.check_usable(self.context)
                if value.spec.shape != spec.shape or value.spec.dtype != spec.dtype:
                    raise IOSpecMismatchError(
                        f"Cannot pass {value.spec} to input {name!r} of {self.name}, which "
                        f"expects {spec}")
                value = value.cpu()
            elif isinstance(value, torch.Tensor):
                self._check_tensor(spec, value)
            else:
                raise InputError(f"Input {name!r} of {self.name} must be a torch.Tensor or a "
                                 f"TensorProxy, not {type(value).__name__}")
            values[name] = value
        self.context._new_record(self.name)
        graph = self.program.graph
        if self.program.state:  # registered constants: the registry's host copies
            constants = {**graph.constants, **self.context.registry.host_values(self.program)}
            graph = replace(graph, constants=constants)
        results = interpret(graph, values)
        return {n: TensorProxy(self.context, self.output_specs[n], None, results[n])
                for n in self.program.outputs}


class ReferenceDevice(Device):
    """The host itself: functions run as torch eager; no DRAM, no commands, no cycles.

    Parameters
    ----------
    config : ArchConfig
        The chip programs are compiled for (layouts are computed, never used).
    name : str
        The device string.
    """

    cycles_kind = "none"

    def compiled_function(self, context: Context, program: DeviceProgram, key: str,
                          strict: bool) -> CompiledFunction:
        return HostFunction(context, program, key, strict)

    def _no_memory(self, what: str) -> NoReturn:
        raise DeviceError(f"{self.name} runs on the host and has no device memory: "
                          f"{what} needs a device backend such as mncore2:auto")

    def allocate(self, layout: Layout, owner: str = "unowned") -> Buffer:
        self._no_memory(f"allocating a buffer of layout {layout}")

    def execute(self, command: Command) -> CommandResult:
        self._no_memory(command.summary())

    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        self._no_memory(f"reading {buf}")

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        self._no_memory(f"writing {buf}")

    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        self._no_memory(f"converting {src} into {dst}")

    def peek(self, buf: Buffer) -> np.ndarray:
        self._no_memory(f"peeking {buf}")

    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        self._no_memory(f"poking {buf}")

    def dram_snapshot(self) -> DramSnapshot:
        self._no_memory("a DRAM snapshot")
