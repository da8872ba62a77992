"""CompiledFunction: a loaded device program, called with tensors and/or TensorProxies.

Each call runs as device commands (see ``docs/model.md``); on a device without device memory
(the host reference ``pfvm:cpu``) the Context picks a subclass that runs them eagerly instead
(:class:`mlsdk.host.HostFunction`).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from mncore_compiler.interpreter import PreparedGraph
from mncore_compiler.program import DeviceProgram
from mncore_hdl.converter.program import ProgramError, compile_program
from mncore_hdl.layout import LayoutError, conversion, dtype_name, element_type, to_device

from . import trace as _trace
from ._values import check_input_values, check_output_values, input_bytes, input_image
from .call_plan import CallPlan, allocate_outputs
from .costs import buffer_cycles, conversion_cost
from .device.base import BIND_CYCLES, LoadedProgram
from .device.commands import Bind, Buffer, Command, Convert, HostWrite, Launch
from .device.replay import CallReplay
from .errors import (
    ConversionRequiredError,
    FunctionUnloadedError,
    InputError,
    IOSpecMismatchError,
    OptimizerChangedError,
    StaleTensorError,
)
from .iospec import IOSpec
from .proxy import TensorProxy, allocate_input_proxies
from .registry import Registry
from .report import Advice
from .session import Session

if TYPE_CHECKING:
    from .device.base import DramDevice

__all__ = ["CompiledFunction", "producer_of"]

def producer_of(proxy: TensorProxy) -> tuple[str, str] | None:
    """The ``(name, key)`` of the compiled function whose call returned ``proxy``; None for a
    TensorProxy no compiled call returned (an allocated input, registered state)."""
    return proxy.producer


class CompiledFunction:
    """A function compiled for the device; call it with a dict of inputs.

    Inputs may be host tensors (written to the device) or TensorProxies from earlier calls
    in the same Context (handed over on the device). Outputs are TensorProxies.

    Parameters
    ----------
    session : Session
        The open device the function is loaded on (``context.session``).
    registry : Registry
        The registered module state its program reads (``context.registry``).
    program : DeviceProgram
        The compiled program.
    key : str
        The function's unique name on the device (``"name#n"``).
    strict : bool
        Whether a call that needs a layout conversion is an error.

    Attributes
    ----------
    name : str
        The device program's name.
    input_specs, output_specs : dict of str to IOSpec
        What each IO expects and produces, in calling / returning order.
    bindings : dict of str to Buffer
        For each input, the buffer the last call read it from (after a relocation, the
        producer's buffer).
    cache_status : str
        What the compile cache did for this function: ``"hit"``, ``"miss"`` or ``"off"``.

    Notes
    -----
    The function owns one device buffer per input and per constant, and its program's input
    descriptors. They are given back when the function is garbage-collected or
    :meth:`unload` is called. Calls from several threads are serialised by the device lock.
    """

    cache_status: str = "off"  # set by Context.compile (mlsdk.cache)
    #: The torch optimizers the function closes over, as captured (set by Context.compile):
    #: a training step is only valid for the parameter lists it was compiled with.
    optimizers: tuple[Any, ...] = ()

    def __init__(self, session: Session, registry: Registry, program: DeviceProgram, key: str,
                 strict: bool):
        self.session = session
        self.registry = registry
        self.program = program
        self.name = program.name
        self.key = key
        self.strict = strict
        self.input_specs = {n: self._spec(n, program.graph.inputs[n], program.layouts[n])
                            for n in program.inputs}
        self.output_specs = {n: self._spec(n, program.output_types[n],
                                           program.output_layouts[n])
                             for n in program.outputs}
        self._own: dict[str, Buffer] = {}
        self.bindings: dict[str, Buffer] = {}
        self.unloaded = False
        # How a call of host tensors runs once one has (mlsdk.call_plan); None until then.
        self._call_plan: CallPlan | None = None
        with session.lock:
            self._load()
        self._finalizer = self._unload_on_collect()

    def _unload_on_collect(self) -> weakref.finalize | None:
        """The finalizer that unloads the function when it is collected (hook: the host
        reference loads nothing)."""
        # Holds the device and the buffers, never self.
        return weakref.finalize(self, self._device.retire_program, self.key,
                                tuple(self._own.values()))

    @property
    def _device(self) -> DramDevice:
        return self.session.dram

    def unload(self) -> None:
        """Give back the function's device buffers and descriptors now; calling it afterwards
        raises FunctionUnloadedError. Unloading twice does nothing."""
        if self.unloaded:
            return
        self.unloaded = True
        if self._finalizer is not None and self._finalizer.detach() is not None:
            self._device.unload_program(self.key, tuple(self._own.values()))
        self._own.clear()
        self.bindings.clear()

    @staticmethod
    def _spec(name: str, ttype: Any, layout: Any) -> IOSpec:
        return IOSpec(name, ttype.shape, ttype.torch_dtype, layout)

    def __repr__(self) -> str:
        ins = ", ".join(self.input_specs)
        outs = ", ".join(self.output_specs)
        return f"CompiledFunction({self.name!r}: {{{ins}}} -> {{{outs}}})"

    # -- loading ----------------------------------------------------------------------------

    def _load(self) -> None:
        """Allocate this function's own buffers, upload its constants, bind its inputs."""
        device = self._device
        program = self.program
        graph = program.graph
        layouts = program.layouts
        # Registered constants live in the Context's registry (mlsdk.registry), not here.
        constants = [c for c in program.constants if c not in program.state]
        names = [*program.inputs, *constants]
        owner = f"function {self.key} (inputs and constants)"
        try:
            for name in names:
                self._own[name] = device.allocate(layouts[name], owner)
        except BaseException:
            self._release()
            raise
        # What a call works out from the program alone, once: each input's spec and own
        # buffer, the function's own constants' buffers, each output's layout.
        self._inputs = tuple((n, self.input_specs[n], self._own[n]) for n in program.inputs)
        self._constant_buffers = {c: self._own[c] for c in program.constants if c in self._own}
        self._output_layouts = tuple((n, program.output_layouts[n]) for n in program.outputs)
        self._owner = f"TensorProxies (outputs of {self.key})"
        run, unread = _runner(graph, self.name)
        device.load_program(LoadedProgram(
            self.key, graph, dict(layouts), dict(program.output_layouts), program.inputs,
            program.launch_outputs, program.constants, program.flops, run,
            unread=unread))
        record = self.session.new_record(self.name, kind="load")
        for name in constants:
            image = to_device(graph.constants[name], layouts[name])
            self.session.execute(HostWrite(self._own[name], image), record)
        self.registry.device_buffers(program, record)
        for name in program.inputs:
            self.session.execute(Bind(self.key, name, self._own[name]), record)
            self.bindings[name] = self._own[name]

    def _release(self) -> None:
        device = self._device
        for buf in self._own.values():
            device.free(buf)
        self._own.clear()

    # -- explicit transfers -----------------------------------------------------------------

    def allocate_input_proxy(self) -> dict[str, TensorProxy]:
        """One empty TensorProxy per input, keyed like the inputs and in their input specs.

        Fill each with :meth:`TensorProxy.load_from`, then call the function with the dict:
        the call binds their buffers (relocations) and moves no host bytes. See
        ``docs/transfers.md``.
        """
        self.session.check_open()
        if self.unloaded:
            raise FunctionUnloadedError(
                f"{self.name} ({self.key}) was unloaded; compile or load it again to "
                "allocate its input proxies")
        return allocate_input_proxies(self.session, self.input_specs, self.key,
                                      self._input_buffer)

    def _input_buffer(self, spec: IOSpec) -> Buffer | None:
        """A fresh buffer for an input proxy (hook: the host reference has none)."""
        return self._device.allocate(spec.layout, f"input proxies of {self.key}")

    # -- calling ----------------------------------------------------------------------------

    @_trace.hook("call")
    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        """Run the function on ``inputs`` (name -> torch.Tensor or TensorProxy).

        Thread-safe: the whole call (staging the inputs into the function's buffers, Launch,
        the outputs) runs under the device lock.
        """
        self.session.check_open()
        if self.unloaded:
            raise FunctionUnloadedError(
                f"{self.name} ({self.key}) was unloaded; compile or load it again to call it")
        self._check_names(inputs)
        self._check_optimizers()
        with self.session.lock:
            plan = self._call_plan
            tensors = None if plan is None else plan.match(self, inputs)
            self.registry.before_call(self.program)  # e.g. a changed learning rate
            if tensors is not None:
                assert plan is not None
                return plan.run(tensors)
            outputs = self._run(inputs)
            if plan is None:
                self._call_plan = self._plan_for(inputs)
            return outputs

    @property
    def call_plan(self) -> CallPlan | None:
        """How a call of host tensors of the inputs' types runs (:mod:`mlsdk.call_plan`),
        once such a call has run; None before."""
        return self._call_plan

    def _plan_for(self, inputs: Mapping[str, Any]) -> CallPlan | None:
        """A :class:`~mlsdk.call_plan.CallPlan` of calls like the one just made with
        ``inputs``, when they were all host tensors of the inputs' types and the device
        replays calls; else None (asked again after the next call)."""
        if not self.session.device.has_memory:
            return None
        device = self._device
        program = device.programs.get(self.key)
        if not device.replays or program is None:
            return None
        for name, spec, _ in self._inputs:
            value = inputs[name]
            if (type(value) is not torch.Tensor or value.dtype != spec.dtype
                    or value.shape != spec.shape):
                return None
        replay = CallReplay(device, program, tuple((own, spec.layout)
                                                   for _, spec, own in self._inputs))
        return CallPlan(self, replay, self._inputs, self._constant_buffers,
                        self._output_layouts, self._owner)

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        """Stage the inputs, Launch, and hand the fresh output buffers out as TensorProxies."""
        plan, counts, advice = self._plan(inputs)
        device = self._device
        outputs = allocate_outputs(device, self._output_layouts, self._owner)
        record = self.session.new_record(self.name)
        record.conversions, record.relocations = counts
        record.advice = advice
        command: Command | None = None
        try:
            execute = self.session.execute
            for command in plan:
                execute(command, record)
                if isinstance(command, Bind):
                    self.bindings[command.io] = command.buffer
            registry = self.registry
            state = registry.device_buffers(self.program, record)
            bindings = {**self.bindings, **self._constant_buffers, **state}
            # A training step stores its updates into the very buffers it read them from:
            # a Launch reads every input before it stores any output.
            if self.program.state_writes:
                writes = registry.state_write_buffers(self.program, record)
                execute(Launch(self.key, bindings, {**outputs, **writes}), record)
                registry.commit_writes(self.program)
            else:  # an inference: no state update to store or mark written
                execute(Launch(self.key, bindings, dict(outputs)), record)
        except BaseException:
            # A failed or interrupted (Ctrl-C) call hands nothing out: its output buffers are
            # given back, and an input whose Bind was under way may or may not be in its
            # descriptor register, so the next call binds it again.
            if isinstance(command, Bind):
                self.bindings.pop(command.io, None)
            for buf in outputs.values():
                device.free(buf)
            raise
        producer = (self.name, self.key)
        session, specs = self.session, self.output_specs
        return {n: TensorProxy(session, specs[n], buf, producer=producer)
                for n, buf in outputs.items()}

    def _check_names(self, inputs: Any) -> None:
        if type(inputs) is dict and inputs.keys() == self.input_specs.keys():
            return  # the common case, at once
        if not isinstance(inputs, Mapping):
            raise InputError(f"{self.name} takes a dict of inputs named {list(self.input_specs)},"
                             f" not {type(inputs).__name__}")
        missing = [n for n in self.input_specs if n not in inputs]
        extra = [n for n in inputs if n not in self.input_specs]
        if missing or extra:
            raise InputError(f"{self.name} takes inputs {list(self.input_specs)}; missing "
                             f"{missing}, unexpected {extra}")

    def _check_optimizers(self) -> None:
        for record in self.optimizers:
            changed = record.changed()
            if changed is not None:
                raise OptimizerChangedError(
                    f"{self.name} was compiled as a training step of optimizer "
                    f"{record.name!r}, whose parameter list has changed since: {changed}. "
                    "Compile the function again after changing the optimizer's parameters")

    def check_input(self, name: str, value: Any) -> TensorProxy | torch.Tensor:
        """Check ``value`` for input ``name`` before anything runs, and return it.

        A TensorProxy must be live data of this function's session; unless its spec is
        memcopyable to the input's, it must be convertible into it (same shape and dtype).
        A tensor must have the input's shape and dtype and representable values.

        Raises
        ------
        InputError
            ``value`` is neither a tensor nor a TensorProxy, or a tensor that does not fit.
        StaleTensorError
            The TensorProxy was freed, belongs to another Context, or holds no data.
        IOSpecMismatchError
            The TensorProxy's spec cannot be handed over to the input.
        """
        return self._check_input(name, value, values=True)

    def _check_input(self, name: str, value: Any, *, values: bool) -> TensorProxy | torch.Tensor:
        """:meth:`check_input`; a tensor's values are checked only with ``values`` (a caller
        that lays the tensor out next checks them there: :func:`~mlsdk._values.input_image`)."""
        spec = self.input_specs[name]
        if isinstance(value, TensorProxy):
            value.check_usable(self.session)
            if self.session.device.has_memory and value.buffer is None:
                raise StaleTensorError(f"{value!r} holds no device buffer")
            if not value.spec.is_memcopyable_to(spec):
                given = value.spec
                value.check_convertible_to(spec, f"input {name!r} of {self.name}")
                if given.shape != spec.shape or given.dtype != spec.dtype:
                    raise IOSpecMismatchError(
                        f"Cannot pass {given} to input {name!r} of {self.name}, which expects "
                        f"{spec}: they differ in {given.describe_difference(spec)}")
            return value
        if isinstance(value, torch.Tensor):
            self._check_tensor(spec, value, values)
            return value
        raise InputError(f"Input {name!r} of {self.name} must be a torch.Tensor or a "
                         f"TensorProxy, not {type(value).__name__}")

    def _plan(self, inputs: Mapping[str, Any],
              ) -> tuple[list[Command], tuple[int, int], list[Advice]]:
        """Check every input and list the commands that stage it, with the advice that would
        remove each conversion; nothing runs yet."""
        plan: list[Command] = []
        advice: list[Advice] = []
        conversions = relocations = 0
        bindings = self.bindings
        for name, spec, own in self._inputs:
            value = inputs[name]
            if (type(value) is torch.Tensor and value.dtype == spec.dtype
                    and value.shape == spec.shape):
                # A host tensor of the input's type (the common case, checked here inline):
                # laid out into the function's own buffer, which is bound unless it is.
                plan.append(self._host_write(own, name, value, spec))
                if bindings.get(name) is not own:
                    plan.append(Bind(self.key, name, own))
                continue
            value = self._check_input(name, value, values=False)
            if isinstance(value, TensorProxy):
                assert value.buffer is not None  # checked by check_input
                if value.spec.is_memcopyable_to(spec):
                    plan.append(Bind(self.key, name, value.buffer))
                    relocations += 1
                    continue
                plan.append(self._conversion(name, value, value.buffer, spec))
                advice.append(self.advice_for(name, value))
                conversions += 1
            else:
                plan.append(self._host_write(own, name, value, spec))
            if self.bindings.get(name) != own:
                plan.append(Bind(self.key, name, own))
        return plan, (conversions, relocations), advice

    def _host_write(self, own: Buffer, name: str, value: torch.Tensor,
                    spec: IOSpec) -> HostWrite:
        """The HostWrite of host tensor ``value`` into input ``name``'s own buffer. A tensor
        whose own bytes are its layout's image goes as itself (the device may keep it:
        docs/model.md, "The copies that remain"); any other is laid out."""
        image = input_bytes(value, spec.layout)
        if image is not None:
            return HostWrite(own, image, value, spec.layout)
        return HostWrite(own, input_image(self.name, name, value, spec.layout))

    def advice_for(self, name: str, proxy: TensorProxy) -> Advice:
        """What compiling ``proxy``'s producer with its output in input ``name``'s spec would
        save on a call that converts ``proxy`` into ``name`` (modeled: :mod:`mlsdk.costs`).

        The conversion's cycles and converter bytes go, one Bind comes, and the producer's
        Launch writes the output in the new layout (more cycles when it spans fewer Groups).
        """
        spec = self.input_specs[name]
        config = self.session.device.config
        src = proxy.buffer
        own = self._own.get(name)
        cost = conversion_cost(config, proxy.spec.layout, spec.layout,
                               src_group=src.group if src is not None else 0,
                               dst_group=own.group if own is not None else 0)
        launch = (buffer_cycles(config, spec.layout, write=True)
                  - buffer_cycles(config, proxy.spec.layout, write=True))
        produced = producer_of(proxy)
        return Advice(produced[0] if produced else None, proxy.spec.name, self.name, name,
                      str(spec), cost.cycles - BIND_CYCLES - launch, cost.converter_bytes,
                      cost.cycles, launch,
                      loop=produced is not None and produced[1] == self.key)

    def _conversion(self, name: str, proxy: TensorProxy, src: Buffer, spec: IOSpec) -> Convert:
        """The Convert that stages ``proxy`` (checked by :meth:`check_input`) into input
        ``name``, unless strict mode or the layout converter forbids it."""
        given = proxy.spec
        if self.strict:
            raise ConversionRequiredError(
                f"Input {name!r} of {self.name} expects layout {spec.layout}, but the "
                f"TensorProxy is in layout {given.layout}; strict mode forbids the "
                "DRAM-to-DRAM conversion. Compile the producer with io_spec_constraints="
                f"{{{given.name!r}: <this function>.input_specs[{name!r}]}}. Advice: "
                f"{self.advice_for(name, proxy)}"
            )
        try:
            descriptor = conversion(given.layout, spec.layout)
            # The RTL converter's own program compiler has the last word on what it can run.
            compile_program(descriptor, self.session.device.config)
        except (LayoutError, ProgramError) as exc:
            raise IOSpecMismatchError(
                f"Input {name!r} of {self.name}: the layout converter cannot convert "
                f"{given.layout} into {spec.layout} ({exc}). Compile the producer with "
                f"io_spec_constraints={{{given.name!r}: <this function>.input_specs[{name!r}]}}"
            ) from None
        return Convert(src, str(given.layout), self._own[name], str(spec.layout),
                       descriptor, spec.dtype_name)

    def _check_tensor(self, spec: IOSpec, value: torch.Tensor, values: bool = True) -> None:
        if value.shape != spec.shape or value.dtype != spec.dtype:
            raise InputError(
                f"Input {spec.name!r} of {self.name} must be a {spec.dtype_name} tensor of "
                f"shape {spec.shape}, not {dtype_name(value.dtype)} of shape "
                f"{tuple(value.shape)}"
            )
        if values:
            check_input_values(self.name, spec.name, value)


def _runner(graph, name: str):
    """The PE array, functionally: run the graph with constants as read back from DRAM.

    The graph is prepared once, here, at load (:class:`~mncore_compiler.interpreter.
    PreparedGraph`). No output is copied: the device lays each output out into DRAM or keeps
    it write-back, and an output that is a view of what the Launch read is the device's to
    copy before it stores anything over it (``DramDevice._own_outputs``: only a backend whose
    loads are views of its live DRAM has such outputs). Only int64 outputs can hold a value
    their lanes cannot, so only they are range-checked. Returns ``run`` and the inputs and
    constants it never reads (:attr:`LoadedProgram.unread`)."""
    # An input or constant the graph never reads need not be given (the functional model's
    # Launch then skips decoding it: LoadedProgram.unread).
    prepared = PreparedGraph(graph, unused_optional=True)
    types = graph.value_types()
    lanes = {out: element_type(types[value].torch_dtype) for out, value in graph.outputs.items()}
    narrowed = tuple(out for out, lane in lanes.items()
                     if lane.narrowed and lane.value_range is not None)

    def run(values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        outputs = prepared.run_loaded(values)
        if narrowed:
            check_output_values(name, {n: outputs[n] for n in narrowed})
        return outputs
    return run, prepared.unused
