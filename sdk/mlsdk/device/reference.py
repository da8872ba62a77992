"""``pfvm:cpu`` and ``pfvm:cuda``: the host reference. Compiled functions run as plain torch
eager, on the host's CPU or on its CUDA GPU.

There is no device model behind it: a call runs the function's graph with the IR interpreter on
torch tensors of the device's torch device (``"cpu"`` or ``"cuda"``), issues no device command,
and returns TensorProxies that hold their result tensor there (``buffer`` is None; ``cpu()``
copies it to the host). A function's constants are moved to the torch device once, when it is
loaded; its inputs at each call. Its report has one ``call`` record per call, without commands,
and its cycles are of kind ``none``. It is what the modeled backends' results are compared with.
``pfvm:cuda`` opens only where ``torch.cuda.is_available()``; elsewhere it raises
DeviceNotAvailableError naming ``pfvm:cpu``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch
from mncore_compiler.interpreter import interpret
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor, Layout

from .._values import check_output_values
from ..compiled import CompiledFunction
from ..errors import DeviceError, DeviceNotAvailableError, InputError, IOSpecMismatchError
from ..iospec import IOSpec
from ..proxy import TensorProxy
from .base import Device, DramSnapshot
from .commands import Buffer, Command, CommandResult

if TYPE_CHECKING:
    from mncore_compiler.program import DeviceProgram

    from ..context import Context

__all__ = ["ReferenceDevice", "HostFunction", "TORCH_DEVICES"]

#: Device string -> the torch device its functions run on.
TORCH_DEVICES: dict[str, str] = {"pfvm:cpu": "cpu", "pfvm:cuda": "cuda"}


class HostFunction(CompiledFunction):
    """A compiled function on the host reference: nothing is loaded, and each call runs the
    graph eagerly on tensors of the device's torch device (its constants moved there once).
    A TensorProxy input is read back with ``.cpu()`` and moved again, simple rather than fast.

    A TensorProxy input is accepted when its shape and dtype match the input's (layouts do not
    exist on the host, so there is nothing to relocate or convert, and ``bindings`` stays
    empty). An allocated input proxy (``allocate_input_proxy()``, holding its host tensor) is
    accepted where its spec is memcopyable to the input's, as on a device.
    """

    def _load(self) -> None:
        """Nothing to allocate or bind: move the constants to the torch device, once."""
        graph = self.program.graph
        where = self.torch_device
        self._graph = replace(graph, constants={n: t.to(where)
                                                for n, t in graph.constants.items()})

    @property
    def torch_device(self) -> torch.device:
        """The torch device the function runs on (its device's)."""
        device = self.context.device
        assert isinstance(device, ReferenceDevice)  # HostFunctions are made only by it
        return device.torch_device

    def _input_buffer(self, spec: IOSpec) -> Buffer | None:
        """Input proxies hold a host tensor: no buffer."""
        return None

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        values = {}
        where = self.torch_device
        for name, spec in self.input_specs.items():
            value = inputs[name]
            if isinstance(value, TensorProxy):
                value.check_usable(self.context)
                if not value.spec.is_memcopyable_to(spec):
                    value.check_convertible_to(spec, f"input {name!r} of {self.name}")
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
            values[name] = value.to(where)
        self.context._new_record(self.name)
        graph = self._graph
        if self.program.state:  # registered constants: the registry's host copies
            state = self.context.registry.host_values(self.program)
            constants = {**graph.constants, **{n: t.to(where) for n, t in state.items()}}
            graph = replace(graph, constants=constants)
        results = interpret(graph, values)
        check_output_values(self.name, results)
        if self.program.state_writes:  # a training step: its updates become the host copies
            self.context.registry.commit_writes(self.program, results)
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
    torch_device : torch.device or str
        Where the functions compute: ``"cpu"`` (``pfvm:cpu``) or ``"cuda"`` (``pfvm:cuda``).
    """

    cycles_kind = "none"

    def __init__(self, config: ArchConfig, name: str,
                 torch_device: torch.device | str = "cpu"):
        super().__init__(config, name)
        self.torch_device = torch.device(torch_device)

    @classmethod
    def create(cls, config: ArchConfig, name: str, options: Mapping[str, str]) -> Device:
        """The reference for ``name``, on the torch device :data:`TORCH_DEVICES` gives it.

        Raises
        ------
        DeviceNotAvailableError
            For ``pfvm:cuda`` when torch sees no CUDA GPU.
        """
        base = name.partition("?")[0]
        torch_device = TORCH_DEVICES.get(base, "cpu")
        if torch_device == "cuda" and not torch.cuda.is_available():
            built = (f"built with CUDA {torch.version.cuda}" if torch.version.cuda
                     else "a CPU-only build")
            raise DeviceNotAvailableError(
                f"Device {name!r} needs a CUDA GPU that torch can use, but torch sees none "
                f"(torch.cuda.is_available() is False; torch {torch.__version__}, {built}); "
                "use 'pfvm:cpu', the same host reference on the CPU")
        return cls(config, name, torch_device)

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
