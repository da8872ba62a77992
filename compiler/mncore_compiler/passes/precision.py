"""Mixed precision: float32 matmuls read 16-bit operands and accumulate in float32.

``float_dtype="mixed"`` keeps the graph's arithmetic in float32 except its matrix products,
which run the way MN-Core's matrix unit (MAU) runs them in its half-precision mode: operands
in IEEE binary16, products summed in a float32 accumulator. Each float32 ``matmul`` becomes a
``mixed_matmul`` (see :mod:`mncore_compiler.ops`), which rounds each operand to the 16-bit
format and returns float32. A float32 constant that feeds only matmuls (directly or through
``reshape``/``permute``/``expand``, e.g. a ``nn.Linear`` weight and its transpose) is stored
already rounded to 16 bits, which halves its DRAM footprint and changes no result: rounding
commutes with those layout ops, and rounding twice is rounding once.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..ir import Graph, GraphBuilder, Node
from ..ops import MIXED_OPERAND_DTYPES
from ..types import dtype_to_torch
from .compilation import Compilation

__all__ = ["MIXED_OPERAND_DTYPE", "mixed_precision", "mixed_precision_pass"]

#: The operand format ``float_dtype="mixed"`` selects: MN-Core's half precision (binary16).
MIXED_OPERAND_DTYPE = "float16"

# Ops that only move data: a constant reaching a matmul through them may be stored narrow.
_LAYOUT_OPS = frozenset({"reshape", "permute", "expand"})


def mixed_precision(graph: Graph, operand_dtype: str = MIXED_OPERAND_DTYPE) -> Graph:
    """Return ``graph`` with each float32 ``matmul`` made a ``mixed_matmul``.

    Parameters
    ----------
    graph : Graph
        A decomposed graph (``addmm`` already lowered to ``matmul`` + ``add``); not modified.
    operand_dtype : str
        The 16-bit format the matmuls read: ``"float16"`` (the default, MN-Core's half
        precision) or ``"bfloat16"``.

    Returns
    -------
    Graph
        Same inputs, outputs and value names; float32 constants used only by matmuls are
        stored in ``operand_dtype``. Matmuls that are already 16-bit (the function computes
        in float16 itself) are left alone, as is every other op.

    Raises
    ------
    ValueError
        For an ``operand_dtype`` that is not a 16-bit float format.
    """
    if operand_dtype not in MIXED_OPERAND_DTYPES:
        raise ValueError(
            f"operand_dtype must be one of {list(MIXED_OPERAND_DTYPES)}, not {operand_dtype!r}"
        )
    narrow = _matmul_only_constants(graph)
    result = graph.copy()
    result.nodes = []
    for name in narrow:
        result.constants[name] = graph.constants[name].to(dtype_to_torch(operand_dtype))
    builder = GraphBuilder(result)
    for node in graph.nodes:
        op, attrs = node.op, dict(node.attrs)
        if op == "matmul" and node.type.dtype == "float32":
            op, attrs = "mixed_matmul", {"operand_dtype": operand_dtype}
        # Retyped: a layout op on a narrowed constant now yields the 16-bit dtype.
        builder.emit(op, node.operands, node.name, **attrs)
    return result


def mixed_precision_pass(compilation: Compilation) -> Compilation:
    """The pipeline step: :func:`mixed_precision` when the request's ``float_dtype`` option
    is ``"mixed"``."""
    if compilation.request.float_dtype != "mixed":
        return compilation
    return replace(compilation, graph=mixed_precision(compilation.graph))


def _matmul_only_constants(graph: Graph) -> list[str]:
    """Float32 constants whose every use ends, through layout ops only, in a float32 matmul."""
    users: dict[str, list[Node]] = {}
    for node in graph.nodes:
        for operand in dict.fromkeys(node.operands):
            users.setdefault(operand, []).append(node)
    returned = set(graph.outputs.values())
    memo: dict[str, bool] = {}

    def feeds_only_matmuls(value: str) -> bool:
        if value not in memo:
            uses = users.get(value, [])
            memo[value] = bool(uses) and value not in returned and all(
                (use.op == "matmul" and use.type.dtype == "float32")
                or (use.op in _LAYOUT_OPS and feeds_only_matmuls(use.name))
                for use in uses
            )
        return memo[value]

    return [name for name, tensor in graph.constants.items()
            if _is_float32(tensor) and feeds_only_matmuls(name)]


def _is_float32(tensor: object) -> bool:
    return isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
