"""HostFunction: a compiled function on a device without device memory (the host reference)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from mncore_compiler.interpreter import PreparedGraph

from ._values import check_output_values
from .compiled import CompiledFunction
from .device.commands import Buffer
from .device.reference import ReferenceDevice
from .iospec import IOSpec
from .proxy import TensorProxy
from .stores import HostStorage

__all__ = ["HostFunction"]


class HostFunction(CompiledFunction):
    """A compiled function on the host reference: nothing is loaded, and each call runs the
    graph eagerly on tensors of the device's torch device (its constants moved there once).
    A TensorProxy input is read back with ``.cpu()`` and moved again, simple rather than fast.

    Takes the parameters of :class:`~mlsdk.compiled.CompiledFunction`; the Context picks this
    class for a device whose ``has_memory`` is False.

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
        self._prepared = PreparedGraph(self._graph)

    def _unload_on_collect(self) -> weakref.finalize | None:
        """Nothing was loaded on a device: nothing to unload."""
        return None

    @property
    def torch_device(self) -> torch.device:
        """The torch device the function runs on (its device's)."""
        device = self.session.device
        if not isinstance(device, ReferenceDevice):
            raise TypeError(f"A HostFunction runs on the host reference (pfvm:cpu), not on "
                            f"{device.name}")
        return device.torch_device

    def _input_buffer(self, spec: IOSpec) -> Buffer | None:
        """Input proxies hold a host tensor: no buffer."""
        return None

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        values = {}
        where = self.torch_device
        for name in self.input_specs:
            value = self.check_input(name, inputs[name])
            if isinstance(value, TensorProxy):
                value = value.cpu()
            values[name] = value.to(where)
        self.session.new_record(self.name)
        graph = self._graph
        constants = None
        if self.program.state:  # registered constants: the registry's host copies
            state = self.registry.host_values(self.program)
            constants = {**graph.constants, **{n: t.to(where) for n, t in state.items()}}
        results = self._prepared(values, constants=constants)
        check_output_values(self.name, results)
        if self.program.state_writes:  # a training step: its updates become the host copies
            self.registry.commit_writes(self.program, results)
        return {n: TensorProxy(self.session, self.output_specs[n], HostStorage(results[n]))
                for n in self.program.outputs}
