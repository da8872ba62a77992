"""Capture's checks and errors: the calling convention, state writes, unsupported ops, torch's.

Called by :func:`mncore_compiler.capture.capture_step`: the calling convention before
tracing, a torch error while tracing, the unsupported ops while converting, and the state writes
once the trace is converted (see :mod:`mncore_compiler.functionalize` for how the updates were
tracked).
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from mncore_hdl.layout import dtype_name
from torch import fx

from .errors import CaptureError, CompilerError, TraceError, UnsupportedOperationError
from .functionalize import RANDOM_OPS
from .ir import Graph, fresh_name
from .step_state import StateSnapshot
from .types import DTYPES, dtype_to_torch

__all__ = ["SUPPORTED_HINT", "TRACING_NOTE", "Problems", "anchor_stack_traces", "check_result",
           "check_sample_inputs", "explain_trace_error", "source_line", "state_writes",
           "unsupported_op"]

_IR_TORCH_DTYPES = tuple(dtype_to_torch(d) for d in DTYPES)


def check_sample_inputs(samples: object) -> tuple[list[str], list[torch.Tensor]]:
    """The input names and private copies of the tensors, or a CaptureError."""
    checked = _check_tensor_dict(samples, "sample_inputs must be", "input", "sample input")
    for name, value in checked.items():
        if value.dtype not in _IR_TORCH_DTYPES:
            raise CaptureError(
                f"sample input {name!r} has dtype {str(value.dtype).replace('torch.', '')}; "
                f"the MN-Core compiler takes inputs of dtype {', '.join(DTYPES)}"
            )
    # Traced from private copies: a function that works in place (or that the compiler then
    # rejects) can never touch the caller's tensors.
    return list(checked), [t.detach().clone() for t in checked.values()]


def check_result(result: object) -> list[str]:
    """The output names of what the traced function returned, or a CaptureError."""
    checked = _check_tensor_dict(result, "the function must return", "output", "output")
    if not checked:
        raise CaptureError("the function returned an empty dict; return at least one output")
    return list(checked)


def _check_tensor_dict(value: object, must: str, kind: str, item: str) -> dict[str, torch.Tensor]:
    # must: "sample_inputs must be" / "the function must return"; kind and item name the entries.
    if not isinstance(value, Mapping):
        raise CaptureError(f"{must} a dict of str to torch.Tensor, not {type(value).__name__}")
    for name, tensor in value.items():
        if not isinstance(name, str):
            raise CaptureError(f"{kind} names must be str, not {type(name).__name__} ({name!r})")
        if not isinstance(tensor, torch.Tensor):
            raise CaptureError(
                f"{item} {name!r} must be a torch.Tensor, not {type(tensor).__name__}"
            )
        if tensor.numel() == 0:
            raise CaptureError(
                f"{item} {name!r} has zero elements (shape {tuple(tensor.shape)}); zero-size "
                "tensors are not supported: give every input and output at least one element"
            )
    return dict(value)


def state_writes(graph: Graph, written: Mapping[str, str], tensors: Mapping[str, torch.Tensor],
                 snapshot: StateSnapshot, registered: Mapping[int, str],
                 training: bool | None) -> dict[str, str]:
    """Turn every constant the step updated into a state write, adding its value to the
    graph's outputs; return registered name -> that output's name.

    Parameters
    ----------
    graph : Graph
        The converted trace; its outputs gain one entry per state write.
    written : dict of str to str
        Constant name -> the IR value it holds after the step, for each constant the step
        updated in place (:meth:`~mncore_compiler.functionalize.Functionalizer.written_constants`).
    tensors : dict of str to torch.Tensor
        Constant name -> the user's tensor it was captured from (to tell registered state,
        by ``id``, from a gradient or an unregistered tensor).
    snapshot : StateSnapshot
        The state taken before tracing (which tensors are gradients).
    registered : dict of int to str
        ``id`` of each registered tensor -> its registered name.
    training : bool or None
        The caller's ``training`` option.

    Raises
    ------
    CaptureError
        For an updated tensor that is not registered, a gradient accumulated into a ``.grad``
        the function did not zero, ``training=False`` with updates, ``training=True`` without.
    """
    read = {o for node in graph.nodes for o in node.operands} | set(graph.outputs.values())
    writes: dict[str, str] = {}
    taken = set(graph.outputs)
    for constant, value in written.items():
        tensor = tensors[constant]
        if tensor.numel() == 0:  # an update of no elements writes nothing
            continue
        name = registered.get(id(tensor))
        if name is not None:
            writes[name] = value
            continue
        grad = snapshot.grad_ids.get(id(tensor))
        if grad is not None:
            if constant in read:
                raise CaptureError(
                    f"loss.backward() accumulates into {grad}, a gradient that exists before "
                    "the function runs; a compiled training step starts from no gradient. "
                    "Call optimizer.zero_grad() (set_to_none=True, the default) inside the "
                    "function, before backward()")
            continue  # zeroed, then accumulated: a gradient internal to the step
        raise CaptureError(
            f"the function updates {_describe(constant, tensor)} in place, but that tensor is "
            "not registered state, so the update could not persist on the device. Register "
            "the module (context.registry.register('model', model)) and the optimizer's "
            "buffers (set_tensor_name + context.register_buffer) before compiling")
    if training is False and writes:
        hint = ("; a BatchNorm in train() mode updates its running statistics, as in torch: "
                "call model.eval() to compile inference" if any(
                    name.endswith(("running_mean", "running_var", "num_batches_tracked"))
                    for name in writes) else "")
        raise CaptureError(
            f"compile(training=False), but the function updates {sorted(writes)} in place (a "
            f"training step); leave training unset or pass training=True{hint}")
    if training is True and not writes:
        raise CaptureError(
            "compile(training=True), but the function updates no registered tensor: a training "
            "step calls loss.backward() and optimizer.step() over registered parameters")
    outputs: dict[str, str] = {}
    for name, value in writes.items():
        out = fresh_name(f"{name}@state", taken)
        graph.outputs[out] = value
        outputs[name] = out
    return outputs


def _describe(constant: str, tensor: torch.Tensor) -> str:
    dtype = dtype_name(tensor.dtype)
    return f"{constant!r} (a {dtype} tensor of shape {tuple(tensor.shape)})"


#: Added to an error the function raised while traced (it propagates as it is): what differs
#: from an eager call.
TRACING_NOTE = (
    "(raised while the MN-Core compiler traced the function on its sample inputs, with "
    "torch.compiler.is_exporting() True: libraries such as transformers then take their "
    "export paths, which may need what an eager call fills in, such as an attention_mask)")


def explain_trace_error(exc: RuntimeError, training: bool | None) -> Exception:
    """The kit's error for a torch error raised while tracing: a clear CaptureError for the
    mistakes it recognises, else a :class:`TraceError` naming the user's line and what to do."""
    text = str(exc)
    if "grad can be implicitly created only for scalar outputs" in text:
        return CaptureError(
            "backward() was called on a tensor that is not a scalar, without a gradient: "
            "torch needs loss.backward() on a single-element loss (reduce it, e.g. "
            "loss.mean()), or backward(gradient) with a gradient of the tensor's shape")
    if "does not require grad" in text and training is False:
        return CaptureError(
            "compile(training=False), but the function calls backward(): with training=False "
            "it is traced without autograd. Leave training unset (or pass training=True) to "
            "compile a training step")
    where = _user_frame(traceback.extract_tb(exc.__traceback__))
    at = f"\n  at {where}" if where else ""
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "_local_scalar_dense" in text or "data-dependent" in text:
        first = ("the function read a tensor's value in Python (.item(), .tolist(), `if "
                 "tensor:`, a value-dependent shape)")
        todo = ("A compiled function is one fixed program, traced once: keep the value a "
                "tensor (torch.where for a branch), or pass it as an input")
    else:
        todo = ("Run the function eagerly on the same sample inputs to reproduce it: the "
                "compiler traces it once on them")
    return TraceError(f"torch raised {type(exc).__name__} while tracing the function: "
                      f"{first}{at}\n{todo}")


def unsupported_op(key: str) -> str:
    """The problem of an aten op capture cannot translate, with a hint where one helps."""
    op = key.split(".")[1] if key.count(".") >= 2 else key
    if op.removesuffix("_") in RANDOM_OPS:
        return (f"{key} draws random numbers, which the MN-Core compiler cannot generate on "
                "the device (a Dropout in train() mode does): call model.eval() for the layers "
                "that draw them, or make the randomness an input of the function")
    if op.startswith("_foreach_"):
        return (f"{key} is a multi-tensor ('foreach') kernel, which the MN-Core compiler "
                "does not support; pass foreach=False to the torch optimizer (or to "
                "clip_grad_norm_) that uses it")
    return f"{key} is not supported by the MN-Core compiler"


#: Where the supported set is listed, the last line of an unsupported-op error.
SUPPORTED_HINT = "Supported ops: mlsdk.supported_ops(), listed in docs/ops.md."

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n(?P<code>.*)')
#: Frames in these packages are never the user's line (torch itself, the compiler's tracing):
#: the user's line is the innermost frame outside them.
_NOT_USER = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
             os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _user_frame(frames: Iterable[traceback.FrameSummary]) -> str | None:
    """``file:line in name: code`` for the innermost frame outside torch and the compiler."""
    found = None
    for frame in frames:
        if not os.path.abspath(frame.filename).startswith(_NOT_USER):
            found = frame
    if found is None:
        return None
    code = (found.line or "").strip()
    return f"{_short(found.filename)}:{found.lineno} in {found.name}: {code}"


def anchor_stack_traces(fn: Callable[..., Any]) -> None:
    """Have make_fx keep ``fn``'s own frame in each node's stack trace: torch keeps only
    ``forward`` frames otherwise, and an unsupported op is reported at the user's line."""
    register = getattr(fx.proxy, "_register_stack_trace_anchor", None)
    target = getattr(inspect.unwrap(fn), "__func__", inspect.unwrap(fn))
    # A private torch hook, for want of a public one (torch 2.13); without it the lines are
    # those of forward() methods only.
    if register is not None:
        register(target)


def source_line(node: fx.Node) -> str | None:
    """The user's source line that produced a traced node (from its recorded stack trace)."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    frames = [traceback.FrameSummary(m["file"], int(m["line"]), m["name"], line=m["code"])
              for m in _FRAME.finditer(trace)]
    return _user_frame(frames)


def _short(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


class Problems:
    """Every unsupported op of one capture: the converter records each and carries on, so one
    compile names them all (:meth:`error`)."""

    def __init__(self) -> None:
        #: Problem -> the names of the traced nodes that hit it, in trace order.
        self.found: dict[str, list[str]] = {}
        #: Compiler bugs (a captured type disagreeing with torch's) -> their nodes.
        self.bugs: dict[str, list[str]] = {}

    def add(self, problem: str, node: fx.Node) -> None:
        self.found.setdefault(problem, []).append(node.name)

    def bug(self, problem: str, node: fx.Node) -> None:
        """Record a compiler bug; :meth:`error` raises it once no op is unsupported."""
        self.bugs.setdefault(problem, []).append(node.name)

    @property
    def any(self) -> bool:
        """Whether the capture hit any problem, unsupported op or compiler bug."""
        return bool(self.found or self.bugs)

    def error(self, lines: Mapping[str, str | None]) -> CompilerError:
        """One error listing every problem once, with the first source line that hit it;
        ``lines`` maps a traced node's name to its line (:func:`source_line`).

        Unsupported ops come first: an :class:`UnsupportedOperationError` listing them all
        (a compiler bug the same trace hit is named after them). Without any, the first
        compiler bug is a :class:`CompilerError` naming the op and the user's line."""
        if not self.found:
            bug, nodes = next(iter(self.bugs.items()))
            where = [line for line in (lines.get(node) for node in nodes) if line is not None]
            at = f"\n  at {where[0]}" if where else ""
            others = len(self.bugs) - 1
            also = f"\n(and {others} more internal error(s))" if others else ""
            return CompilerError(f"{bug}{at}{also}\nThis is a bug of the MN-Core compiler: "
                                 "please report it with the function that hit it")
        problems = []
        entries = []
        for problem, nodes in self.found.items():
            seen = list(dict.fromkeys(lines.get(node) for node in nodes))
            where = [line for line in seen if line is not None]
            problems.append((problem, where[0] if where else None))
            more = f" (and {len(where) - 1} more)" if len(where) > 1 else ""
            at = f"\n    at {where[0]}{more}" if where else ""
            entries.append(f"{problem}{at}")
        if len(entries) == 1:
            text = entries[0].replace("\n    at", "\n  at")
        else:
            text = (f"{len(entries)} problems stop the MN-Core compiler (all of them listed):\n"
                    + "\n".join(f"  - {entry}" for entry in entries))
        if self.bugs:
            text += (f"\n(the trace also hit {len(self.bugs)} internal error(s) of the "
                     f"compiler, the first: {next(iter(self.bugs))})")
        return UnsupportedOperationError(f"{text}\n{SUPPORTED_HINT}", tuple(problems))
