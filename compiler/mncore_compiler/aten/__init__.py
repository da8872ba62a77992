"""Translation of traced aten operations into IR ops: one small handler per aten overload.

:mod:`.registry` holds the handler table and its extension API (:func:`~.registry.on`),
:mod:`.args` the argument readers handlers share. Each handler file (one per role) registers
its handlers when imported; importing this package imports them all, so :data:`HANDLERS` is
complete.
"""

from __future__ import annotations

from . import (
    advanced_indexing,
    attention,
    backward,
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
    pointwise,
    pooling,
    reductions,
    rnn,
    shape,
    spatial_losses,
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
    on,
)
from .rnn import rnn_decompositions

__all__ = [
    "DECOMPOSED",
    "HANDLERS",
    "Builder",
    "Deferred",
    "Handler",
    "Unavailable",
    "advanced_indexing",
    "attention",
    "backward",
    "conv",
    "conv_transpose",
    "cumulative_batch_norms",
    "decompose",
    "decomposition_table",
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
    "pointwise",
    "pooling",
    "reductions",
    "rnn",
    "rnn_decompositions",
    "shape",
    "spatial_losses",
]
