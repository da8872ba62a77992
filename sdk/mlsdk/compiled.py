"""CompiledFunction: a loaded device program, called with tensors and/or TensorProxies.

Each call runs as device commands (see ``docs/model.md``); the host reference ``pfvm:cpu``
wraps its programs in a subclass that runs them eagerly instead
(:class:`mlsdk.device.reference.HostFunction`).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from mncore_compiler.interpreter import interpret
from mncore_compiler.program import DeviceProgram
from mncore_hdl.converter.program import ProgramError, compile_program
from mncore_hdl.layout import LayoutError, conversion, to_device

from . import trace as _trace
from ._values import check_input_values, check_output_values
from .device.base import LoadedProgram
from .device.commands import Bind, Buffer, Command, Convert, HostWrite, Launch
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

if TYPE_CHECKING:
    from .context import Context

__all__ = ["CompiledFunction"]


class CompiledFunction:
    """A function compiled for the device; call it with a dict of inputs.

    Inputs may be host tensors (written to the device) or TensorProxies from earlier calls
    in the same Context (handed over on the device). Outputs are TensorProxies.

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

    def __init__(self, context: Context, program: DeviceProgram, key: str, strict: bool):
        self.context = context
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
        with context.device.lock:
            self._load()
        # Holds the device and the buffers, never self: collecting the function unloads it.
        self._finalizer = weakref.finalize(self, context.device.retire_program, key,
                                           tuple(self._own.values()))

    def unload(self) -> None:
        """Give back the function's device buffers and descriptors now; calling it afterwards
        raises FunctionUnloadedError. Unloading twice does nothing."""
        if self.unloaded:
            return
        self.unloaded = True
        if self._finalizer.detach() is not None:
            self.context.device.unload_program(self.key, tuple(self._own.values()))
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
        device = self.context.device
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
        run = _runner(graph, self.name, tuple(program.state_writes.values()))
        device.load_program(LoadedProgram(
            self.key, graph, dict(layouts), dict(program.output_layouts), program.inputs,
            program.launch_outputs, program.constants, program.flops, run))
        record = self.context._new_record(self.name, kind="load")
        for name in constants:
            image = to_device(graph.constants[name], layouts[name])
            self.context._execute(HostWrite(self._own[name], image), record)
        self.context.registry.device_buffers(program, record)
        for name in program.inputs:
            self.context._execute(Bind(self.key, name, self._own[name]), record)
            self.bindings[name] = self._own[name]

    def _release(self) -> None:
        device = self.context.device
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
        return allocate_input_proxies(self, self._input_buffer)

    def _input_buffer(self, spec: IOSpec) -> Buffer | None:
        """A fresh buffer for an input proxy (hook: the host reference has none)."""
        return self.context.device.allocate(spec.layout, f"input proxies of {self.key}")

    # -- calling ----------------------------------------------------------------------------

    @_trace.hook("call")
    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        """Run the function on ``inputs`` (name -> torch.Tensor or TensorProxy).

        Thread-safe: the whole call (staging the inputs into the function's buffers, Launch,
        the outputs) runs under the device lock.
        """
        self.context._check_open()
        if self.unloaded:
            raise FunctionUnloadedError(
                f"{self.name} ({self.key}) was unloaded; compile or load it again to call it")
        self._check_names(inputs)
        self._check_optimizers()
        with self.context.device.lock:
            self.context.registry.before_call(self.program)  # e.g. a changed learning rate
            return self._run(inputs)

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, TensorProxy]:
        """Stage the inputs, Launch, and hand the fresh output buffers out as TensorProxies."""
        plan, counts = self._plan(inputs)
        device = self.context.device
        outputs: dict[str, Buffer] = {}
        owner = f"TensorProxies (outputs of {self.key})"
        try:
            for name in self.program.outputs:
                outputs[name] = device.allocate(self.program.output_layouts[name], owner)
        except BaseException:
            for buf in outputs.values():
                device.free(buf)
            raise
        record = self.context._new_record(self.name)
        record.conversions, record.relocations = counts
        command: Command | None = None
        try:
            for command in plan:
                self.context._execute(command, record)
                if isinstance(command, Bind):
                    self.bindings[command.io] = command.buffer
            constants = {c: self._own[c] for c in self.program.constants if c in self._own}
            registry = self.context.registry
            state = registry.device_buffers(self.program, record)
            bindings = {**self.bindings, **constants, **state}
            # A training step stores its updates into the very buffers it read them from:
            # a Launch reads every input before it stores any output.
            writes = registry.state_write_buffers(self.program, record)
            self.context._execute(Launch(self.key, bindings, {**outputs, **writes}), record)
            registry.commit_writes(self.program)
        except BaseException:
            # A failed or interrupted (Ctrl-C) call hands nothing out: its output buffers are
            # given back, and an input whose Bind was under way may or may not be in its
            # descriptor register, so the next call binds it again.
            if isinstance(command, Bind):
                self.bindings.pop(command.io, None)
            for buf in outputs.values():
                device.free(buf)
            raise
        return {n: TensorProxy(self.context, self.output_specs[n], outputs[n])
                for n in self.program.outputs}

    def _check_names(self, inputs: Any) -> None:
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

    def _plan(self, inputs: Mapping[str, Any]) -> tuple[list[Command], tuple[int, int]]:
        """Check every input and list the commands that stage it; nothing runs yet."""
        plan: list[Command] = []
        conversions = relocations = 0
        for name, spec in self.input_specs.items():
            value = inputs[name]
            own = self._own[name]
            if isinstance(value, TensorProxy):
                value.check_usable(self.context)
                if value.buffer is None:
                    raise StaleTensorError(f"{value!r} holds no device buffer")
                if value.spec.is_memcopyable_to(spec):
                    plan.append(Bind(self.key, name, value.buffer))
                    relocations += 1
                    continue
                plan.append(self._conversion(name, value, spec))
                conversions += 1
            elif isinstance(value, torch.Tensor):
                self._check_tensor(spec, value)
                plan.append(HostWrite(own, to_device(value, spec.layout)))
            else:
                raise InputError(f"Input {name!r} of {self.name} must be a torch.Tensor or a "
                                 f"TensorProxy, not {type(value).__name__}")
            if self.bindings.get(name) != own:
                plan.append(Bind(self.key, name, own))
        return plan, (conversions, relocations)

    def _conversion(self, name: str, proxy: TensorProxy, spec: IOSpec) -> Convert:
        proxy.check_convertible_to(spec, f"input {name!r} of {self.name}")
        given = proxy.spec
        if given.shape != spec.shape or given.dtype != spec.dtype:
            raise IOSpecMismatchError(
                f"Cannot pass {given} to input {name!r} of {self.name}, which expects {spec}: "
                f"they differ in {given.describe_difference(spec)}"
            )
        if self.strict:
            raise ConversionRequiredError(
                f"Input {name!r} of {self.name} expects layout {spec.layout}, but the "
                f"TensorProxy is in layout {given.layout}; strict mode forbids the "
                "DRAM-to-DRAM conversion. Compile the producer with io_spec_constraints="
                f"{{{given.name!r}: <this function>.input_specs[{name!r}]}}"
            )
        try:
            descriptor = conversion(given.layout, spec.layout)
            # The RTL converter's own program compiler has the last word on what it can run.
            compile_program(descriptor, self.context.mndevice.config)
        except (LayoutError, ProgramError) as exc:
            raise IOSpecMismatchError(
                f"Input {name!r} of {self.name}: the layout converter cannot convert "
                f"{given.layout} into {spec.layout} ({exc}). Compile the producer with "
                f"io_spec_constraints={{{given.name!r}: <this function>.input_specs[{name!r}]}}"
            ) from None
        assert proxy.buffer is not None  # checked by _plan
        return Convert(proxy.buffer, str(given.layout), self._own[name], str(spec.layout),
                       descriptor, spec.dtype_name)

    def _check_tensor(self, spec: IOSpec, value: torch.Tensor) -> None:
        if tuple(value.shape) != spec.shape or value.dtype != spec.dtype:
            raise InputError(
                f"Input {spec.name!r} of {self.name} must be a {spec.dtype_name} tensor of "
                f"shape {spec.shape}, not {str(value.dtype).removeprefix('torch.')} of shape "
                f"{tuple(value.shape)}"
            )
        check_input_values(self.name, spec.name, value)


def _runner(graph, name: str, state_outputs: tuple[str, ...] = ()):
    """The PE array, functionally: run the graph with constants as read back from DRAM."""
    def run(values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        inputs = {n: values[n] for n in graph.inputs}
        # The constants as read back from DRAM stand in for the graph's own; no output
        # copies: the device lays each output out into DRAM, which copies it.
        constants = {n: values[n] for n in graph.constants}
        outputs = interpret(graph, inputs, copy_outputs=False, constants=constants)
        # Except state updates, which may be views of what the Launch read from DRAM and is
        # about to overwrite in place (a state updated to another state's old value).
        for out in state_outputs:
            outputs[out] = outputs[out].clone()
        check_output_values(name, outputs)
        return outputs
    return run
