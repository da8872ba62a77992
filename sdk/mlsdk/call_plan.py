"""A compiled function's call plan: a repeated call of host tensors, with its fixed work done once.

After a call whose inputs were all host tensors of the inputs' types, a
:class:`~mlsdk.compiled.CompiledFunction` on a device that replays calls (the functional
model: :attr:`~mlsdk.device.base.DramDevice.replays`) keeps a :class:`CallPlan`. A later
call given host tensors of the same types runs through it: what depends only on the program
and the input types is settled (the input specs and buffers, each write's layout and figures,
the Launch's bindings, the output layouts and owner, the range each narrowed input must hold),
and the call does the value work, in the order and with the checks of the general path
(``CompiledFunction._run``): each input's type compared with its spec and an int64 input's
values with its lanes' range, before anything runs; the output buffers allocated; the call's
record; the HostWrites and the Launch replayed on the device (:mod:`mlsdk.device.replay`),
each command's figures added as it completes; the registered state's buffers asked for as the
general path asks; the outputs handed out as TensorProxies.

A call the plan does not fit takes the general path, which checks everything again and says
what is wrong: inputs of another kind or type, values out of range, an input bound to another
buffer (after a call given a TensorProxy for it: the general path binds the own buffer back),
an unloaded function, a closed device, an active trace (which records each command). What
another call, a free, a write or an unload may change is asked on every call, never
remembered: each buffer's liveness, the kept values the Launch reads, the registered state's
buffers (the Launch's bindings are worked out again when they differ), the program loaded under
the function's name (the replay executes the Launch as a command when it is another).
"""

from __future__ import annotations

from typing import Any

import torch
from mncore_hdl.layout import Layout, element_type

from . import trace as _trace
from .device.commands import Buffer
from .iospec import IOSpec
from .proxy import TensorProxy

__all__ = ["CallPlan", "allocate_outputs"]


def allocate_outputs(device: Any, layouts: tuple[tuple[str, Layout], ...], owner: str
                     ) -> dict[str, Buffer]:
    """A fresh buffer on ``device`` for each ``(name, layout)`` of a call's outputs, held by
    ``owner``: all of them, or none (those allocated are given back when one fails)."""
    outputs: dict[str, Buffer] = {}
    try:
        for name, layout in layouts:
            outputs[name] = device.allocate(layout, owner)
    except BaseException:
        for buf in outputs.values():
            device.free(buf)
        raise
    return outputs


class CallPlan:
    """How a call of a function with host tensors of its input types runs, settled once.

    The plan holds what the function holds (its session, registry, program, buffers), never
    the function itself, which holds the plan: the function is still freed by reference
    counting when its last user drops it (its finalizer gives its buffers back at once).

    Parameters
    ----------
    function : CompiledFunction
        The loaded function (its public attributes: this module sits under
        :mod:`mlsdk.compiled`, which makes the plan).
    replay : CallReplay
        The device's replay of the call's commands (:class:`~mlsdk.device.replay.CallReplay`).
    inputs : tuple of (str, IOSpec, Buffer)
        Each input's name, spec and own buffer, in calling order.
    constants : dict of str to Buffer
        The function's own constants' buffers.
    outputs : tuple of (str, Layout)
        Each output's name and layout, in returning order.
    owner : str
        Who holds the output buffers (named in out-of-memory errors).

    Attributes
    ----------
    own : dict of str to Buffer
        Each input's own buffer: a plan fits a call only while every input is bound to it.
    state : dict of str to Buffer or None
        The registered state's buffers the Launch's bindings were last worked out for.
    """

    def __init__(self, function: Any, replay: Any,
                 inputs: tuple[tuple[str, IOSpec, Buffer], ...], constants: dict[str, Buffer],
                 outputs: tuple[tuple[str, Layout], ...], owner: str):
        self.replay = replay
        checked = []
        for name, spec, own in inputs:
            shape = torch.Size(spec.shape)
            lane = element_type(spec.dtype)
            # The range an int64 input's values must hold: checked per call (its lanes).
            bounds = lane.value_range if lane.narrowed and shape.numel() else None
            checked.append((name, spec.dtype, shape, own, bounds))
        self._inputs = tuple(checked)
        self._names = function.input_specs.keys()
        self.own = {name: own for name, _, own in inputs}
        self._constants = constants
        self._outputs = outputs
        self._owner = owner
        self._session = function.session
        self._registry = function.registry
        self._program = function.program
        self._name = function.name
        self._producer = (function.name, function.key)
        self._specs = function.output_specs
        self.state: dict[str, Buffer] | None = None
        self._bindings: dict[str, Buffer] = {}

    def match(self, function: Any, inputs: Any) -> list[torch.Tensor] | None:
        """The tensors of ``inputs`` in input order when the plan fits a call of ``function``
        (the one it was made for: see the module docstring), else None; changes nothing.
        Called under the device lock."""
        if (type(inputs) is not dict or inputs.keys() != self._names or function.unloaded
                or function.session.closed or _trace.active is not None):
            return None
        bindings = function.bindings
        tensors = []
        for name, dtype, shape, own, bounds in self._inputs:
            value = inputs[name]
            if (type(value) is not torch.Tensor or value.dtype != dtype
                    or value.shape != shape or bindings.get(name) is not own):
                return None
            if bounds is not None:
                least, most = torch.aminmax(value)
                if least.item() < bounds[0] or most.item() > bounds[1]:
                    return None  # the general path says which value
            tensors.append(value)
        return tensors

    def run(self, tensors: list[torch.Tensor]) -> dict[str, TensorProxy]:
        """The call of :meth:`match` ed ``tensors``: what ``CompiledFunction._run`` does for
        host tensors in their own bound buffers. Called under the device lock."""
        session = self._session
        device = session.dram
        outputs = allocate_outputs(device, self._outputs, self._owner)
        record = session.new_record(self._name)
        try:
            add = record.add
            self.replay.write(tensors, add)
            registry, program = self._registry, self._program
            state = registry.device_buffers(program, record)
            if state != self.state:
                self._bindings = {**self.own, **self._constants, **state}
                self.state = state
            if program.state_writes:
                writes = registry.state_write_buffers(program, record)
                self.replay.launch(self._bindings, {**outputs, **writes}, add)
                registry.commit_writes(program)
            else:
                self.replay.launch(self._bindings, outputs, add)
        except BaseException:
            for buf in outputs.values():
                device.free(buf)
            raise
        producer, specs = self._producer, self._specs
        return {n: TensorProxy(session, specs[n], buf, producer=producer)
                for n, buf in outputs.items()}
