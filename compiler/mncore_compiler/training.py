"""The end of capturing a training step: constants it updated -> state writes, and clear errors.

Called by :func:`mncore_compiler.capture.capture_step` once the trace is converted; see
:mod:`mncore_compiler.functionalize` for how the updates were tracked.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .errors import CaptureError, UnsupportedOperationError
from .functionalize import RANDOM_OPS, StateSnapshot
from .ir import Graph, fresh_name

__all__ = ["explain_trace_error", "state_writes", "unsupported_op"]


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
    dtype = str(tensor.dtype).removeprefix("torch.")
    return f"{constant!r} (a {dtype} tensor of shape {tuple(tensor.shape)})"


def explain_trace_error(exc: RuntimeError, training: bool | None) -> Exception:
    """A clear error for a torch error raised while tracing, or ``exc`` itself."""
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
    return exc


def unsupported_op(key: str, supported: list[str]) -> UnsupportedOperationError:
    """The error for an aten op capture cannot translate, with a hint where one helps."""
    op = key.split(".")[1] if key.count(".") >= 2 else key
    if op.removesuffix("_") in RANDOM_OPS:
        return UnsupportedOperationError(
            f"{key} draws random numbers, which the MN-Core compiler cannot generate on the "
            "device (a Dropout in train() mode does): call model.eval() for the layers that "
            "draw them, or make the randomness an input of the function"
        )
    if op.startswith("_foreach_"):
        return UnsupportedOperationError(
            f"{key} is a multi-tensor ('foreach') optimizer kernel, which the MN-Core compiler "
            "does not support; create the torch optimizer with foreach=False"
        )
    return UnsupportedOperationError(
        f"{key} is not supported by the MN-Core compiler; "
        f"supported ops: {', '.join(supported)}"
    )
