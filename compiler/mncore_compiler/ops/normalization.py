"""Normalisations along one dim: ``softmax`` and ``log_softmax``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..types import TensorType
from .registry import Attrs, register
from .rules import call_inline, check_dim, per_input

__all__: list[str] = []


def _softmax_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check_dim(attrs["dim"], types[0].rank)
    return types[0]


register(
    "softmax", "normalization", 1, ("dim",), _softmax_rule,
    lambda x, a: torch.softmax(x[0], a["dim"]), per_input(5), call_inline(torch.softmax, "dim"),
)  # fmt: skip


register(
    "log_softmax", "normalization", 1, ("dim",), _softmax_rule,
    lambda x, a: torch.log_softmax(x[0], a["dim"]), per_input(5),
    call_inline(torch.log_softmax, "dim"),
)  # fmt: skip
