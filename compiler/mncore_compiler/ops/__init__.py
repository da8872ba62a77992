"""The IR op table: per op, its type rule, its torch reference implementation and its FLOPs.

:mod:`.registry` holds the table and its extension API (:func:`~.registry.register`), and
:mod:`.rules` the type and FLOP rules op files share. Each op file (one per role) registers
its ops when imported; importing this package imports them all, so :data:`OPS` is complete.
"""

from __future__ import annotations

from . import (
    activations,
    adaptive_pooling,
    advanced_indexing,
    conv,
    elementwise,
    indexing,
    losses,
    matmul,
    normalization,
    pointwise,
    pooling,
    reductions,
    shape,
    sorting,
)
from .elementwise import COMPARISONS
from .losses import NLL_REDUCTIONS
from .matmul import MIXED_OPERAND_DTYPES
from .registry import OPS, OpDef, OpTypeError, get_op, infer_type, register

__all__ = [
    "COMPARISONS",
    "MIXED_OPERAND_DTYPES",
    "NLL_REDUCTIONS",
    "OPS",
    "OpDef",
    "OpTypeError",
    "activations",
    "adaptive_pooling",
    "advanced_indexing",
    "conv",
    "elementwise",
    "get_op",
    "indexing",
    "infer_type",
    "losses",
    "matmul",
    "normalization",
    "pointwise",
    "pooling",
    "reductions",
    "register",
    "shape",
    "sorting",
]
