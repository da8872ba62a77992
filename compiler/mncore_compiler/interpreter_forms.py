"""Cheaper torch calls for a prepared graph's steps, where they give the same bits.

:mod:`.interpreter_codegen` writes each step as its op's inline form. A few steps can be
written as a cheaper torch call whose result holds the same values, bit for bit, because what
differs is only how the result lies in memory (a view instead of a copy, the same tensor
instead of a view of it) and every reader of that result reads values, not strides:

- **matmul of two matrices** is ``torch.mm``: ``torch.matmul`` of two 2-D operands calls
  ``mm`` itself, after working out their ranks on every call;
- **a reshape to its operand's own shape** is the operand: torch's reshape returns a view of
  it with the same sizes and strides (an embedding's gather, say, is reshaped to the shape
  it already has);
- **a column picked as an index** (``x[:, k]``: a slice of length 1 along ``dim``, then a
  reshape dropping that dim, read only as the index of ``index_select``) is
  ``x.select(dim, k)``, a view, instead of a contiguous copy and a reshape of it:
  ``index_select`` gathers the same rows whatever the strides of its index. The reshape step
  does the select, reading the slice step's value, which is then ``x`` itself (the one value
  not of its node's declared type, which the first run's check skips: its one reader is that
  reshape).

A value the graph outputs is never made a view or an alias (the caller gets what the
reference gives); every other step keeps its op's inline form or reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .types import TensorType

__all__ = ["Form", "forms"]

#: A step's expression: a template over its operands (``{0}``, ``{1}``, ...), the constants
#: it binds (``{name}``), as an op's :attr:`~.ops.registry.OpDef.inline` gives, and whether
#: its value is of the node's declared type (what the first run checks).
Form = tuple[str, dict[str, Any], bool]

_ALIAS: Form = ("{0}", {}, True)


def forms(steps: Sequence[tuple], types: Mapping[int, TensorType], outputs: set[int]
          ) -> dict[int, Form]:
    """The steps (by index in ``steps``) written as a cheaper call, and that call's form.

    Parameters
    ----------
    steps : sequence of prepared steps
        ``(reference, operand slots, attributes, result slot, node)``, in graph order.
    types : dict of int to TensorType
        Every slot's type (inputs, constants and each step's result).
    outputs : set of int
        The slots the graph outputs: their steps are left as they are.
    """
    readers: dict[int, list[tuple[int, int]]] = {}
    for index, step in enumerate(steps):
        for position, slot in enumerate(step[1]):
            readers.setdefault(slot, []).append((index, position))
    found: dict[int, Form] = {}
    for index, (_, operands, attrs, slot, node) in enumerate(steps):
        if node.op == "matmul" and all(types[s].rank == 2 for s in operands):
            found[index] = ("{fn}({0}, {1})", {"fn": torch.mm}, True)  # a new tensor either way
        elif slot in outputs:
            continue
        elif node.op == "reshape" and node.type.shape == types[operands[0]].shape:
            found.setdefault(index, _ALIAS)
        elif node.op == "slice":
            column = _index_column(steps, index, readers, types, outputs)
            if column is not None:
                found[index] = ("{0}", {}, False)  # the operand, for the reshape to select
                found[column] = ("{0}.select({dim}, {start})",
                                 {"dim": attrs["dim"], "start": attrs["start"]}, True)
    return found


def _index_column(steps: Sequence[tuple], index: int, readers: Mapping[int, list],
                  types: Mapping[int, TensorType], outputs: set[int]) -> int | None:
    """When slice step ``index`` picks one position along a dim and its one reader is a
    reshape dropping that dim, read only as ``index_select`` indices: that reshape's index."""
    _, operands, attrs, slot, node = steps[index]
    if attrs["step"] != 1 or attrs["end"] - attrs["start"] != 1:
        return None
    users = readers.get(slot, [])
    if len(users) != 1:
        return None
    reshape = users[0][0]
    _, _, _, picked, reshape_node = steps[reshape]
    shape = list(types[operands[0]].shape)
    del shape[attrs["dim"]]
    if (reshape_node.op != "reshape" or picked in outputs
            or tuple(reshape_node.type.shape) != tuple(shape)):
        return None
    gathers = readers.get(picked, [])
    if not gathers or any(steps[i][4].op != "index_select" or position != 1
                          for i, position in gathers):
        return None
    return reshape
