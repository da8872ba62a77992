"""Capture a dict-to-dict torch function into the MN-Core IR, through make_fx and aten ops."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from .aten import (
    cumulative_batch_norms,
    decomposition_table,
    function_replacements,
    rnn_decompositions,
)
from .capture_checks import (
    TRACING_NOTE,
    anchor_stack_traces,
    check_result,
    check_sample_inputs,
    explain_trace_error,
    source_line,
    state_writes,
)
from .errors import CaptureError, CompilerError
from .fx_to_ir import FxToIR
from .ir import Graph
from .retarget import retarget
from .step_state import (
    OptimizerRecord,
    StateSnapshot,
    closure_objects,
    closure_tensor_names,
)
from .supported import supported_torch_ops

__all__ = ["FLOAT_DTYPES", "Captured", "capture", "capture_step",
           "supported_torch_ops"]

FLOAT_DTYPES: dict[str, str] = {
    "float": "float32",
    "float32": "float32",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    # Captured in float32; the pipeline's mixed-precision pass then gives the matmuls 16-bit
    # operands (mncore_compiler.passes.precision).
    "mixed": "float32",
}
"""Accepted ``float_dtype`` spellings and the IR dtype capture computes in."""

TensorDict = dict[str, torch.Tensor]


def capture(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    sample_inputs: Mapping[str, torch.Tensor],
    *,
    float_dtype: str = "float32",
) -> Graph:
    """Trace ``fn`` on ``sample_inputs`` and return its verified IR graph.

    Parameters
    ----------
    fn : callable
        Takes a dict of tensors and returns a dict of tensors. It may close over
        ``torch.nn.Module`` objects and tensors; those become graph constants, named after
        the closed-over variable (e.g. ``"lin.weight"``) where they can be found.
    sample_inputs : dict of str to torch.Tensor
        Example inputs; they fix the graph's input names, order, shapes and dtypes.
    float_dtype : str
        Dtype in which the function's float32 arithmetic runs: ``"float"``/``"float32"``
        (as written), ``"half"``/``"float16"`` or ``"bfloat16"``. In a reduced precision,
        float32 inputs are cast on entry, float32 constants are stored converted, and
        outputs are cast back, so the graph's input and output dtypes stay those of torch.
        ``"mixed"`` captures in float32: its matmuls get 16-bit operands later, in the
        ``mixed-precision`` pass.

    Returns
    -------
    Graph
        Inputs in ``sample_inputs`` order, outputs in the order ``fn`` returned them.

    Raises
    ------
    CaptureError
        (a ``TypeError``) when ``sample_inputs`` or the value ``fn`` returns is not a dict of
        str to tensors of a dtype in :data:`~mncore_compiler.ir.DTYPES` (floats, int32,
        int64, bool).
    UnsupportedOperationError
        When ``fn`` uses torch operations the compiler cannot express: one error naming
        every one of them, each with the user's source line that produced it.
    TraceError
        (a ``RuntimeError``) when torch raises an error while tracing ``fn`` (a shape
        mismatch, reading a tensor's value in Python), naming the line and what to do.
    ValueError
        For an unknown ``float_dtype``.
    """
    return capture_step(fn, sample_inputs, float_dtype=float_dtype).graph


@dataclass
class Captured:
    """What :func:`capture_step` found.

    Attributes
    ----------
    graph : Graph
        The IR: the function's outputs first, then one output per state write.
    state : dict of str to str
        Constant name -> registered name, for each constant that is a registered tensor.
    state_writes : dict of str to str
        Registered name -> the graph output holding its value after the step, for each
        registered tensor the function updates in place (parameters, optimizer state).
    optimizers : list of OptimizerRecord
        The ``torch.optim.Optimizer`` objects the function closes over, with their
        parameter lists as captured.
    """

    graph: Graph
    state: dict[str, str] = field(default_factory=dict)
    state_writes: dict[str, str] = field(default_factory=dict)
    optimizers: list[OptimizerRecord] = field(default_factory=list)

    @property
    def outputs(self) -> list[str]:
        """The function's own outputs (without the state writes)."""
        hidden = set(self.state_writes.values())
        return [n for n in self.graph.outputs if n not in hidden]


def capture_step(
    fn: Callable[..., Mapping[str, torch.Tensor]],
    sample_inputs: Mapping[str, torch.Tensor],
    *,
    float_dtype: str = "float32",
    registered: Mapping[int, str] | None = None,
    training: bool | None = None,
) -> Captured:
    """:func:`capture` for any function, a training step included, also telling which
    constants are registered module state and which of them the function updates.

    A training step (forward, ``loss.backward()``, ``optimizer.step()``) is traced with
    autograd on; its in-place updates of registered tensors become state writes (see
    :mod:`mncore_compiler.functionalize` and ``docs/training.md``). The user's tensors
    (parameters, gradients, optimizer state) are as they were once this returns.

    Parameters
    ----------
    fn, sample_inputs, float_dtype, registered
        As for :func:`capture`.
    training : bool or None
        None: whatever ``fn`` does. False: an inference function (traced under
        ``torch.no_grad()``); a function that calls ``backward()`` or updates state is a
        CaptureError. True: a training step; one that updates no registered tensor is a
        CaptureError.
    """
    if float_dtype not in FLOAT_DTYPES:
        raise ValueError(f"float_dtype must be one of {sorted(FLOAT_DTYPES)}, not {float_dtype!r}")
    if training not in (None, True, False):
        raise TypeError(f"training must be None, True or False, not {training!r}")
    if not callable(fn):
        raise CaptureError(f"fn must be callable, not {type(fn).__name__}")
    names, tensors = check_sample_inputs(sample_inputs)
    # A wrapper (functools.wraps, mlsdk's pytree adapter) names constants after what it wraps.
    objects = closure_objects(inspect.unwrap(fn))
    # Also for training=False: a BatchNorm in train() mode updates its buffers under no_grad.
    snapshot = StateSnapshot.take(objects)
    exporting = _traced_like_export
    with cumulative_batch_norms(objects):
        module, out_names = _trace(fn, names, tensors, snapshot, training, exporting)
    converter = FxToIR(module, names, closure_tensor_names(objects), registered)
    graph = converter.run(out_names)
    if converter.problems.any:
        # Traced again, recording each node's Python stack (that slows a trace down, so only
        # a failed capture pays for it): the error names the user's line of each problem.
        again = check_sample_inputs(sample_inputs)[1]
        with cumulative_batch_norms(objects):
            traced, _ = _trace(fn, names, again, snapshot, training, exporting,
                               stack_traces=True)
        lines = {node.name: source_line(node) for node in traced.graph.nodes}
        raise converter.problems.error(lines)
    writes = state_writes(graph, converter.fz.written_constants(), converter.constant_tensors(),
                          snapshot, dict(registered or {}), training)
    compute = FLOAT_DTYPES[float_dtype]
    if compute != "float32":
        if writes:
            raise CaptureError(
                f"float_dtype={float_dtype!r}: a training step keeps its parameters and "
                "optimizer state in float32; compile it with float_dtype 'float32' or 'mixed'")
        graph = retarget(graph, compute)
    graph.verify()
    optimizers = [OptimizerRecord.of(var, obj) for var, obj in objects.items()
                  if isinstance(obj, torch.optim.Optimizer)]
    return Captured(graph, dict(converter.state), writes, optimizers)


@contextlib.contextmanager
def _traced_like_export() -> Iterator[None]:
    """The state every function is traced in, inference and training steps alike: the one
    ``torch.export`` traces in.

    Libraries branch on ``torch.compiler.is_compiling()`` / ``is_exporting()`` to leave out
    data-dependent Python control flow (``if mask.all():`` in Hugging Face's mask code, which
    a trace cannot evaluate); non-strict ``torch.export`` sets both flags around its make_fx
    trace, and so does capture. ``optimizer.step()`` alone runs without them (see
    :func:`_optimizer_steps_eager`): ``torch.optim`` then takes its eager path (a
    Python-float step count), as in an eager training step.
    """
    with _EXPORTING.scope(), _optimizer_steps_eager():
        yield


@contextlib.contextmanager
def _optimizer_steps_eager() -> Iterator[None]:
    """Every ``torch.optim.Optimizer.step()`` inside runs with the compiling flags cleared.

    Under them, ``torch.optim`` reads its step count as a tensor (``_get_value``) and hands
    tensors where its eager path passes numbers (``addcdiv_(..., value=-step_size)``); its
    eager path is what the compiled step records. torch's global step hooks (a public API)
    clear the flags before each step and set them again after it.
    """
    saved: list[tuple[bool, bool]] = []

    def before(*_: object) -> None:
        saved.append((torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag))
        torch.compiler._is_compiling_flag = False
        torch.compiler._is_exporting_flag = False

    def after(*_: object) -> None:
        if saved:
            compiling, exporting = saved.pop()
            torch.compiler._is_compiling_flag = compiling
            torch.compiler._is_exporting_flag = exporting

    pre = register_optimizer_step_pre_hook(before)
    post = register_optimizer_step_post_hook(after)
    try:
        yield
    finally:
        pre.remove()
        post.remove()


class _ExportingFlags:
    """``torch.compiler``'s compiling and exporting flags, set while any capture traces.

    The flags are process-wide, not per thread. torch's own context saves and restores them
    around one trace, so two traces in two threads that end out of order leave them set for
    the rest of the process (and the later one traced with them cleared). This counts the
    traces under way: the first sets the flags, the last puts back what they were.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = (False, False)

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._saved = (torch.compiler._is_compiling_flag,
                               torch.compiler._is_exporting_flag)
            self._depth += 1
            torch.compiler._is_compiling_flag = True
            torch.compiler._is_exporting_flag = True
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    (torch.compiler._is_compiling_flag,
                     torch.compiler._is_exporting_flag) = self._saved


@contextlib.contextmanager
def _one_fake_mode() -> Iterator[None]:
    """One ``FakeTensorMode`` for every traced value's metadata, instead of one each.

    ``make_fx`` in real mode records each op's result as a fake tensor, and with no fake mode
    about, ``proxy_tensor.extract_val`` builds a new ``FakeTensorMode`` per value, whose
    constructor records the Python stack (``traceback.extract_stack``): about 15 ms each through
    a transformers model's deep stack, 40% of a BERT-sized capture. The values only need their
    shapes, dtypes and strides, which one mode gives as well. Scoped to one trace (under
    ``_TRACE_LOCK``), and torch's own name is put back afterwards.
    """
    original = proxy_tensor.FakeTensorMode
    shared: list[Any] = []

    def one(**kwargs: Any) -> Any:
        if not shared:
            shared.append(original(**kwargs))
        return shared[0]

    proxy_tensor.FakeTensorMode = one  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        proxy_tensor.FakeTensorMode = original  # type: ignore[misc]


_EXPORTING = _ExportingFlags()
#: make_fx is not thread-safe (its tracing modes are process state): one trace at a time, so
#: that a caller of the compiler's own API from two threads is as safe as Context.compile.
_TRACE_LOCK = threading.RLock()


def _trace(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    names: list[str],
    tensors: list[torch.Tensor],
    snapshot: StateSnapshot,
    training: bool | None,
    exporting: Callable[[], contextlib.AbstractContextManager[None]],
    stack_traces: bool = False,
) -> tuple[fx.GraphModule, list[str]]:
    out_names: list[str] = []

    def flat(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        result = fn(dict(zip(names, args, strict=True)))
        out_names[:] = check_result(result)
        return tuple(result.values())

    # Real-mode tracing runs the step: parameters, gradients and optimizer state change, so
    # they are put back whatever happens (snapshot.restore).
    grad = torch.no_grad() if training is False else torch.enable_grad()
    if stack_traces:
        anchor_stack_traces(fn)
    try:
        with (_TRACE_LOCK, grad, exporting(), rnn_decompositions(), _one_fake_mode(),
              function_replacements()):
            module = make_fx(flat, decomposition_table=decomposition_table(),
                             tracing_mode="real", record_stack_traces=stack_traces)(*tensors)
        created = snapshot.created_state()
    except CompilerError:
        raise
    except RuntimeError as exc:
        raise explain_trace_error(exc, training) from exc
    except Exception as exc:
        # The function's own error propagates as it is, with where it was raised from.
        exc.add_note(TRACING_NOTE)
        raise
    finally:
        snapshot.restore()
    if created:
        raise CaptureError(
            f"the optimizer created its state while the function was traced ({', '.join(created)})"
            ": that was its first step, and the compiled function would run a first step at "
            "every call. Create and register the optimizer state before compiling (e.g. "
            "opt.state[p]['momentum_buffer'] = torch.zeros_like(p), named and registered)"
        )
    return module, out_names
