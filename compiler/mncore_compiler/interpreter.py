"""The IR interpreter: the executable specification every other execution path is tested against."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .ir import Graph
from .ops import get_op

__all__ = ["PreparedGraph", "check_inputs", "interpret"]


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

    A caller that runs one graph many times prepares it once (:class:`PreparedGraph`) instead.
    """
    return PreparedGraph(graph)(inputs, copy_outputs=copy_outputs, constants=constants)


class PreparedGraph:
    """A graph resolved for repeated runs: what :func:`interpret` does, with the per-call work
    done once.

    Preparing looks every node's op up in the op table, gives every value a slot in a flat
    list, and binds each node's reference, operand slots, attributes and declared shape and
    torch dtype into one step, so a call runs the steps with no lookup, no name resolution and
    no type conversion. The graph must not change after it is prepared (prepare it again).
    Ops registered after preparing are not seen, which is no loss: a prepared graph's ops all
    exist.

    Parameters
    ----------
    graph : Graph
        A verified graph.

    Raises
    ------
    KeyError
        When a node's op is not in the op table.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        slots: dict[str, int] = {}
        for name in (*graph.inputs, *graph.constants):
            slots.setdefault(name, len(slots))
        self._inputs = tuple((slots[n], n, t.shape, t.torch_dtype, t.dtype)
                             for n, t in graph.inputs.items())
        self._constants = tuple((slots[n], n) for n in graph.constants)
        steps = []
        for node in graph.nodes:
            declared = node.type
            operands = tuple(slots[name] for name in node.operands)
            slots[node.name] = len(slots)
            steps.append((get_op(node.op).reference, operands, node.attrs, declared.shape,
                          declared.torch_dtype, slots[node.name], node))
        self._steps = tuple(steps)
        self._size = len(slots)
        self._outputs = tuple((out, slots[value]) for out, value in graph.outputs.items())

    def __call__(self, inputs: Mapping[str, torch.Tensor], *, copy_outputs: bool = True,
                 constants: Mapping[str, torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
        """:func:`interpret` of the prepared graph (same parameters, result and errors)."""
        env: list = [None] * self._size
        if not isinstance(inputs, Mapping) or len(inputs) != len(self._inputs):
            check_inputs(self.graph, inputs)
        try:
            for slot, name, shape, dtype, _ in self._inputs:
                value = inputs[name]
                if value.shape != shape or value.dtype != dtype:
                    raise TypeError
                env[slot] = value
        except (KeyError, TypeError, AttributeError):
            check_inputs(self.graph, inputs)  # says what is wrong
            for slot, name, *_ in self._inputs:
                env[slot] = inputs[name]
        given = self.graph.constants if constants is None else constants
        for slot, name in self._constants:
            env[slot] = given[name]
        # One no_grad for the whole graph, and each result checked against its node's declared
        # shape and dtype: this loop runs on every device call.
        with torch.no_grad():
            for reference, operands, attrs, shape, dtype, slot, node in self._steps:
                result = reference([env[i] for i in operands], attrs)
                if result.shape != shape or result.dtype != dtype:
                    raise RuntimeError(
                        f"reference of %{node.name} ({node.op}) gave {tuple(result.shape)} "
                        f"{result.dtype}, but the node declares {node.type}"
                    )
                env[slot] = result
        if not copy_outputs:
            return {out: env[slot] for out, slot in self._outputs}
        # Copies: an output may be a view of an input or a constant (e.g. a permute of one).
        return {out: env[slot].clone(memory_format=torch.contiguous_format)
                for out, slot in self._outputs}
