"""The IR interpreter: the executable specification every other execution path is tested against."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .ir import Graph
from .ops import get_op

__all__ = ["check_inputs", "interpret"]


def check_inputs(graph: Graph, inputs: Mapping[str, object]) -> None:
    """Check that ``inputs`` match the graph's inputs by name, kind, shape and dtype.

    Raises
    ------
    TypeError
        When ``inputs`` is not a mapping, a value is not a tensor, or a dtype differs.
    ValueError
        When names are missing or extra, or a shape differs.
    """
    if not isinstance(inputs, Mapping):
        raise TypeError(
            f"inputs must be a dict of str to torch.Tensor, not {type(inputs).__name__}"
        )
    expected, given = list(graph.inputs), list(inputs)
    missing = [n for n in expected if n not in inputs]
    extra = [n for n in given if n not in graph.inputs]
    if missing or extra:
        raise ValueError(f"inputs must be named {expected}; missing {missing}, unexpected {extra}")
    for name, ttype in graph.inputs.items():
        value = inputs[name]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"input {name!r} must be a torch.Tensor, not {type(value).__name__}")
        shape = tuple(value.shape)
        if shape != ttype.shape:
            raise ValueError(
                f"input {name!r} must have shape {list(ttype.shape)}, not {list(shape)}"
            )
        if value.dtype != ttype.torch_dtype:
            given_dtype = str(value.dtype).replace("torch.", "")
            raise TypeError(f"input {name!r} must have dtype {ttype.dtype}, not {given_dtype}")


def interpret(graph: Graph, inputs: Mapping[str, torch.Tensor], *,
              copy_outputs: bool = True,
              constants: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Run ``graph`` on ``inputs`` by evaluating each node's torch reference, in order.

    Parameters
    ----------
    graph : Graph
        A verified graph.
    inputs : dict of str to torch.Tensor
        One tensor per graph input, of exactly its shape and dtype.
    copy_outputs : bool
        False returns the outputs as computed, possibly views of the inputs or constants (for
        a caller that copies them anyway, like the device storing them to DRAM).
    constants : dict of str to torch.Tensor, optional
        Values for the graph's constants in place of ``graph.constants`` (the device passes
        the tensors it read back from DRAM), of the same names, shapes and dtypes.

    Returns
    -------
    dict of str to torch.Tensor
        One new contiguous tensor per graph output, in output order; writing to it never
        changes the caller's inputs or the graph's constants.

    Raises
    ------
    TypeError, ValueError
        When the inputs do not match the graph (see :func:`check_inputs`).
    RuntimeError
        When a reference implementation disagrees with its node's declared type (a bug in
        the op table, not in the caller's data).
    """
    check_inputs(graph, inputs)
    env: dict[str, torch.Tensor] = {name: inputs[name] for name in graph.inputs}
    env.update(graph.constants if constants is None else constants)
    # One no_grad for the whole graph, and each result checked against its node's declared
    # shape and dtype without building a TensorType: this loop runs on every device call.
    with torch.no_grad():
        for node in graph.nodes:
            result = get_op(node.op).reference([env[name] for name in node.operands],
                                               node.attrs)
            declared = node.type
            if result.shape != declared.shape or result.dtype != declared.torch_dtype:
                raise RuntimeError(
                    f"reference of %{node.name} ({node.op}) gave {tuple(result.shape)} "
                    f"{result.dtype}, but the node declares {declared}"
                )
            env[node.name] = result
    if not copy_outputs:
        return {out: env[value] for out, value in graph.outputs.items()}
    # Copies: an output may be a view of an input or a constant (e.g. a permute of one).
    return {
        out: env[value].clone(memory_format=torch.contiguous_format)
        for out, value in graph.outputs.items()
    }
