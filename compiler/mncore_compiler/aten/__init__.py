"""Translation of traced aten operations into IR ops: one small handler per aten overload.

:mod:`.registry` holds the handler table and its extension API (:func:`~.registry.on`),
:mod:`.args` the argument readers handlers share. Each handler file (one per role) registers
its handlers when imported; importing this package imports them all, so :data:`HANDLERS` is
complete.
"""

from __future__ import annotations

from . import (
    activations,
    adaptive_pooling,
    advanced_indexing,
    attention,
    backward,
    binary_losses,
    conv,
    conv_transpose,
    elementwise,
    factories,
    group_norm,
    indexing,
    layer_norm,
    losses,
    matmul,
    normalization,
    norms,
    optim,
    padding,
    pointwise,
    pooling,
    reductions,
    rnn,
    shape,
    sorting,
    spatial_losses,
    strided,
    view_writes,
)
from .normalization import cumulative_batch_norms
from .registry import (
    DECOMPOSED,
    HANDLERS,
    Builder,
    Deferred,
    Handler,
    Unavailable,
    decompose,
    decomposition_table,
    function_replacements,
    on,
)
from .rnn import rnn_decompositions
from .strided import write_into_strided
from .view_writes import write_into_view

__all__ = [
    "DECOMPOSED",
    "HANDLERS",
    "Builder",
    "Deferred",
    "Handler",
    "Unavailable",
    "activations",
    "adaptive_pooling",
    "advanced_indexing",
    "attention",
    "backward",
    "binary_losses",
    "conv",
    "conv_transpose",
    "cumulative_batch_norms",
    "decompose",
    "decomposition_table",
    "function_replacements",
    "elementwise",
    "factories",
    "group_norm",
    "indexing",
    "layer_norm",
    "losses",
    "matmul",
    "normalization",
    "norms",
    "on",
    "optim",
    "padding",
    "pointwise",
    "pooling",
    "reductions",
    "rnn",
    "rnn_decompositions",
    "shape",
    "sorting",
    "spatial_losses",
    "strided",
    "view_writes",
    "write_into_strided",
    "write_into_view",
]
