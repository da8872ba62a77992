"""Context: the user's facade over a Session, the functions compiled for it, and its registry."""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import torch
from mncore_compiler.driver import function_name
from mncore_compiler.program import DeviceProgram
from mncore_compiler.request import OPTIONS, CompileRequest
from mncore_hdl.layout import Layout

from . import trace as _trace
from .backprop import RegisteredOptimizers, backprop_step
from .cache import CacheOptions
from .compiled import CompiledFunction
from .compiling import compile_to_directory
from .device.base import Device
from .device.registry import MNDevice
from .errors import CodegenError
from .host import HostFunction
from .iospec import IOSpec
from .module_state import register_running_stats
from .optim import register_optimizer_buffers
from .options import resolve_compile_options
from .pipeline import CompiledPipeline, Pipeline
from .proxy import TensorProxy
from .pytree import AutomapFunction, compile_automap
from .registry import Registry
from .report import DEFAULT_HISTORY, Report
from .session import Session
from .storage import StoragePath
from .stores import state_store

__all__ = ["Context", "COMPILE_OPTIONS"]

#: Compile options this kit understands, with what each accepts.
COMPILE_OPTIONS: dict[str, str] = {
    **{name: option.meaning for name, option in OPTIONS.items()},
    "option_json": "path of a JSON file holding an object of these options; a key also given in"
                   " the options dict takes the dict's value",
}


class Context:
    """A session on one device.

    Parameters
    ----------
    device : MNDevice
        The device to run on, e.g. ``MNDevice("mncore2:auto")``.
    history : int or None
        Records :meth:`report` keeps (the most recent; older ones survive in its totals).
        None keeps every record.

    Attributes
    ----------
    session : Session
        The open device and its record, which compiled functions, TensorProxies and the
        registry hold (:mod:`mlsdk.session`).

    Notes
    -----
    A Context may be used from several threads: each call, load and ``.cpu()`` runs under
    the device's lock (:attr:`mlsdk.device.base.Device.lock`), so calls never interleave.

    Examples
    --------
    >>> context = Context(MNDevice("mncore2:auto"))
    >>> double = context.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(4, 4)},
    ...                          storage.path("/tmp/double"))
    >>> double({"x": torch.ones(4, 4)})["y"].cpu()
    """

    # Held weakly: being current does not keep a Context (and its simulator) alive.
    _current: ClassVar[weakref.ref[Context] | None] = None

    def __init__(self, device: MNDevice, *, history: int | None = DEFAULT_HISTORY):
        if not isinstance(device, MNDevice):
            raise TypeError(f"Context takes an MNDevice, not {type(device).__name__}")
        self.mndevice = device
        self.session = Session(device.open(), history=history)
        # Weakly: a function nobody holds is collected, and gives its device memory back.
        self._functions: weakref.WeakValueDictionary[str, CompiledFunction] = (
            weakref.WeakValueDictionary())
        self._keys = itertools.count(1)
        #: Registered module state and its device copies (see :mod:`mlsdk.registry`).
        # The device's capabilities pick the state store (as they pick the function class).
        self.registry = Registry(self.session, state_store(self.session.device.has_memory))
        self._optimizers = RegisteredOptimizers()
        self.registry.optimizer_registrar = self._optimizers.register
        if Context.current() is None:
            Context._current = weakref.ref(self)

    # -- the current context ----------------------------------------------------------------

    @classmethod
    def switch_context(cls, context: Context) -> Context | None:
        """Make ``context`` the current one; return the one it replaces."""
        if not isinstance(context, Context):
            raise TypeError(f"switch_context() takes a Context, not {type(context).__name__}")
        previous = cls.current()
        cls._current = weakref.ref(context)
        return previous

    @classmethod
    def current(cls) -> Context | None:
        return cls._current() if cls._current is not None else None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except Exception as error:  # a failed close (a cut wave file) never masks the block's
            warnings.warn(f"closing {self!r} failed while an exception was propagating: "
                          f"{error}", RuntimeWarning, stacklevel=2)

    @property
    def device(self) -> Device:
        """The open backend (``session.device``)."""
        return self.session.device

    @property
    def closed(self) -> bool:
        return self.session.closed

    def close(self) -> None:
        """End the session: every buffer is freed and TensorProxies become unusable."""
        if self.closed:
            return
        try:
            self.session.close()
        finally:
            if Context.current() is self:
                Context._current = None

    def __repr__(self) -> str:
        return f"Context({self.mndevice!r}{', closed' if self.closed else ''})"

    # -- compiling --------------------------------------------------------------------------

    @_trace.hook("compile")
    def compile(self, fn: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]],
                sample_inputs: Mapping[str, torch.Tensor], codegen_dir: StoragePath, *,
                options: Mapping[str, Any] | None = None, training: bool | None = None,
                io_spec_constraints: Mapping[str, IOSpec | Layout | str] | None = None,
                cache_options: CacheOptions | None = None, num_compiler_threads: int = -1,
                optimizers: Sequence[torch.optim.Optimizer] | None = None,
                export_kwargs: Mapping[str, Any] | None = None) -> CompiledFunction:
        """Compile ``fn`` for this device and load it.

        Parameters
        ----------
        fn : callable
            Takes a dict of tensors, returns a dict of tensors; may close over nn.Modules.
        sample_inputs : dict of str to torch.Tensor
            Example inputs fixing names, shapes and dtypes.
        codegen_dir : StoragePath
            ``storage.path(...)``: where the device program is written.
        options : dict, optional
            See :data:`COMPILE_OPTIONS`; unknown keys are an error. ``"option_json"`` names
            a JSON file of further options, which the dict's own keys override
            (:mod:`mlsdk.options`).
        training : bool or None
            Whether ``fn`` is a training step (forward, ``loss.backward()``,
            ``optimizer.step()``; see ``docs/training.md``). None (the default): found out
            by capturing it; a step that updates registered tensors in place is one. False:
            an inference function, traced without autograd; one that calls ``backward()``
            or updates state is a CaptureError. True: asserts a training step; one that
            updates no registered tensor is a CaptureError. Modules are captured in the
            mode they are in (``train()`` / ``eval()``), as torch runs them.
        io_spec_constraints : dict of str to IOSpec, Layout or str, optional
            IO name -> the IOSpec (or Layout) whose layout that IO must have (typically a
            consumer's ``input_specs[...]``), so that handing the data over is a relocation.
            A ``str`` value names an input of this same function: the output is produced in
            that input's layout (loop-carried state, e.g. ``{"k_out": "k"}`` for a decode
            step's cache), so passing the output back to that input next call is one
            ``Bind``. The output and the input must have the same shape and dtype; a ``str``
            value on a key that is an input is a ConstraintError (see ``docs/iospec.md``).
        cache_options : CacheOptions, optional
            A compile cache (see ``docs/cache.md``): a hit reads the program from it instead
            of compiling. With cache options, :meth:`report` gets a ``"compile"`` record whose
            ``cache`` is ``"hit"``, ``"miss"`` or ``"off"``; the returned function's
            ``cache_status`` says the same (``"off"`` without cache options).
        num_compiler_threads : int
            Threads the compiler may use, as MLSDK's option: ``-1`` (the default) lets it
            choose, else a positive int. This compiler runs on one thread whatever the value,
            so it changes neither the program nor its cache key.
        optimizers : list of torch.optim.Optimizer, optional
            With ``options={"backprop": True}`` (MLSDK's backprop path): the optimizers,
            each registered with ``context.registry.register(name, optimizer)``, that the
            compiled step applies after differentiating ``fn``'s ``"loss"``; the function
            then takes the inputs ``<name>@<group>@mncore_learning_rate`` (0-d float32),
            ``<name>@<group>@mncore_global_step`` (0-d int64) and
            ``mncore_grad_scale_factor`` (0-d int64) besides its own (:mod:`mlsdk.backprop`).
        export_kwargs : dict, optional
            MLSDK's exporter settings: ``{"use_fx2onnx": bool}`` is accepted (this kit has
            one capture, so it changes nothing); any other key is a ValueError
            (:data:`mncore_compiler.request.EXPORT_KWARGS`).
        """
        self.session.check_open()
        if (isinstance(num_compiler_threads, bool) or not isinstance(num_compiler_threads, int)
                or (num_compiler_threads < 1 and num_compiler_threads != -1)):
            raise ValueError("num_compiler_threads must be -1 (the compiler's choice) or a "
                             f"positive int, not {num_compiler_threads!r}")
        if not isinstance(codegen_dir, StoragePath):
            raise TypeError("The codegen directory must be given as storage.path(...), not "
                            f"{type(codegen_dir).__name__}")
        resolved = resolve_compile_options(options, COMPILE_OPTIONS)
        name = function_name(fn)
        if resolved.get("backprop") is True:
            if training is False:
                raise ValueError("options={'backprop': True} compiles a training step; it "
                                 "cannot be combined with training=False")
            fn, sample_inputs = backprop_step(fn, sample_inputs, optimizers, self._optimizers)
            training = True
        elif optimizers is not None:
            raise ValueError("optimizers=[...] goes with options={'backprop': True} (MLSDK's "
                             "backprop path); a function that calls optimizer.step() itself "
                             "needs no optimizers argument")
        if training is not False:
            register_running_stats(self.registry, fn)
        request = CompileRequest(
            name=name, config=self.mndevice.config, options=resolved,
            constraints=_constraint_values(io_spec_constraints), training=training,
            registered=self.registry.tensor_ids(), export_kwargs=export_kwargs or {})
        compiled = compile_to_directory(fn, sample_inputs, codegen_dir.path, request, cache_options)
        status = compiled.cache.status
        if cache_options is not None:
            with self.session.lock:
                self.session.new_record(request.name, kind="compile").cache = status
        _trace.annotate_current(cache=status)
        function = self._adopt(compiled.program, request.strict)
        function.cache_status = status
        function.optimizers = compiled.optimizers
        return function

    def compile_automap(self, fn: Callable[..., Any], args: Any, kwargs: Any,
                        codegen_dir: StoragePath, **compile_kwargs: Any) -> AutomapFunction:
        """Compile ``fn(*args, **kwargs)`` over pytrees: tuples, lists, dicts, NamedTuples and
        registered dataclasses of tensors, in and out (see ``docs/pytree.md``).

        Each tensor leaf is one IO named by its path (``args.0.x``, ``kwargs.scale``,
        ``out.1``); ``compile_kwargs`` (``options``, ``io_spec_constraints`` keyed by those
        names, ...) go to :meth:`compile`. Returns an :class:`~mlsdk.pytree.AutomapFunction`
        called like ``fn`` and returning its structure with TensorProxies.
        """
        return compile_automap(self, fn, args, kwargs, codegen_dir, **compile_kwargs)

    def compile_pipeline(self, functions: Mapping[str, tuple[Any, ...]],
                         edges: Iterable[tuple[Any, ...]], codegen_dir: StoragePath,
                         ) -> CompiledPipeline:
        """Compile several functions that hand tensors to each other, with the layout of every
        handed-off tensor negotiated to minimise the pipeline's modeled cycles (no compile
        order needed; see ``docs/pipelines.md`` and :class:`mlsdk.pipeline.Pipeline`).

        Parameters
        ----------
        functions : dict of str to tuple
            Name -> ``(fn, sample_inputs)`` or ``(fn, sample_inputs, kwargs)``, ``kwargs``
            being :meth:`Pipeline.add <mlsdk.pipeline.Pipeline.add>`'s (``calls`` a run,
            ``options``, pinned ``io_spec_constraints``, ...).
        edges : iterable of tuple
            ``("producer.output", "consumer.input")`` or with a third item, the hand-off's
            count a run (default: the consumer's calls). A function may feed itself.
        codegen_dir : StoragePath
            Each function is compiled into ``codegen_dir / name``; the plan is saved as
            ``codegen_dir / pipeline_plan.json``.

        Returns
        -------
        CompiledPipeline
            ``.functions`` by name and the inspectable ``.plan``.
        """
        self.session.check_open()
        pipe = Pipeline(self)
        for name, entry in functions.items():
            if not isinstance(entry, tuple) or len(entry) not in (2, 3):
                raise TypeError(f"functions[{name!r}] must be (fn, sample_inputs) or (fn, "
                                f"sample_inputs, kwargs), not {type(entry).__name__}")
            pipe.add(name, entry[0], entry[1], **(entry[2] if len(entry) == 3 else {}))
        for edge in edges:
            if not isinstance(edge, tuple) or len(edge) not in (2, 3):
                raise TypeError(f"An edge must be ('fn.output', 'fn.input') or with a count "
                                f"third, not {edge!r}")
            pipe.connect(edge[0], edge[1], count=edge[2] if len(edge) == 3 else None)
        return pipe.compile(codegen_dir)

    @_trace.hook("load")
    def load_codegen_dir(self, codegen_dir: StoragePath, *,
                         strict: bool | None = None) -> CompiledFunction:
        """Load a function compiled earlier (by this process or another) from its codegen
        directory alone; it has the same ``input_specs`` and ``output_specs``.

        Parameters
        ----------
        codegen_dir : StoragePath
            ``storage.path(...)`` of the directory ``compile`` wrote.
        strict : bool, optional
            As the compile option; by default, the value the function was compiled with.
        """
        self.session.check_open()
        if not isinstance(codegen_dir, StoragePath):
            raise TypeError("The codegen directory must be given as storage.path(...), not "
                            f"{type(codegen_dir).__name__}")
        program = DeviceProgram.load(codegen_dir.path)
        if strict is None:
            strict = program.options.get("strict", False) is True
        if program.arch != self.mndevice.config:
            raise CodegenError(f"{codegen_dir} was compiled for another chip configuration; "
                               "recompile it for this device")
        return self._adopt(program, strict)

    def _adopt(self, program: DeviceProgram, strict: bool) -> CompiledFunction:
        self.registry.check_program(program)
        key = f"{program.name}#{next(self._keys)}"
        # The device's capabilities pick the function class: without device memory, calls
        # run on the host.
        kind = CompiledFunction if self.device.has_memory else HostFunction
        function = kind(self.session, self.registry, program, key, strict)
        self._functions[key] = function
        return function

    # -- registered module state (logic in mlsdk.registry) ---------------------------------

    def register_param(self, p: torch.Tensor) -> None:
        """Register the named parameter ``p``: compiled functions that close over it read it
        from a device copy uploaded once and shared (see ``docs/registry.md``)."""
        self.registry.register_tensor(p, "parameter")

    def register_buffer(self, b: torch.Tensor) -> None:
        """Register the named module buffer ``b`` (as :meth:`register_param`)."""
        self.registry.register_tensor(b, "buffer")

    def register_optimizer_buffers(self, optimizer: torch.optim.Optimizer) -> list[str]:
        """Register the named state of ``optimizer`` (after its model's parameters); see
        :func:`mlsdk.optim.register_optimizer_buffers` and ``docs/optim.md``."""
        self.session.check_open()
        return register_optimizer_buffers(self.registry, optimizer)

    def get_registered_value_proxy(self, tensor: torch.Tensor) -> TensorProxy:
        """The TensorProxy of registered ``tensor``'s device copy (not owned by the proxy)."""
        self.session.check_open()
        return self.registry.value_proxy(tensor)

    def synchronize(self) -> None:
        """Wait for outstanding device work, then bring registered host tensors the device
        wrote up to date, in place. Every command of this kit runs synchronously, so there is
        never work to wait for."""
        self.session.check_open()
        self.registry.synchronize()

    def invalidate(self) -> None:
        """Drop the device copies of registered tensors: the next use uploads them again
        from the host tensors (after editing a parameter on the host). Device writes not yet
        brought back by :meth:`synchronize` are discarded."""
        self.session.check_open()
        self.registry.invalidate()

    # -- the record -------------------------------------------------------------------------

    def report(self, *, clear: bool = False) -> Report:
        """What the device did: one record per compiled call, program load and ``.cpu()``
        (the last ``history`` of them), with totals over all of them.

        Parameters
        ----------
        clear : bool
            Forget the records and totals once reported (the next report starts afresh).
        """
        return self.session.report(clear=clear)


def _constraint_values(constraints: object) -> Mapping[str, Any]:
    """``io_spec_constraints`` with each IOSpec as its layout (an SDK type the compiler does
    not know); the :class:`~mncore_compiler.request.CompileRequest` checks the rest."""
    if constraints is None:
        return {}
    if not isinstance(constraints, Mapping):
        raise TypeError("io_spec_constraints must be a dict of IO name -> IOSpec, not "
                        f"{type(constraints).__name__}")
    return {name: spec.layout if isinstance(spec, IOSpec) else spec
            for name, spec in constraints.items()}
