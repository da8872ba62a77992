"""Losses: ``nll_loss`` (what ``cross_entropy`` becomes after ``log_softmax``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..types import FLOAT_IR_DTYPES, TensorType
from .registry import Attrs, OpTypeError, register
from .rules import is_int, per_input

__all__ = ["NLL_REDUCTIONS"]


NLL_REDUCTIONS: tuple[str, ...] = ("none", "mean", "sum")
"""``nll_loss`` reductions, indexed as aten's ``reduction`` argument (0, 1, 2)."""


def _nll_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    logp, target = types
    reduction, ignore = attrs["reduction"], attrs["ignore_index"]
    if reduction not in NLL_REDUCTIONS:
        raise OpTypeError(f"reduction must be one of {list(NLL_REDUCTIONS)}, not {reduction!r}")
    if not is_int(ignore):
        raise OpTypeError(f"ignore_index must be an int, not {ignore!r}")
    if logp.dtype not in FLOAT_IR_DTYPES or logp.rank not in (1, 2):
        raise OpTypeError(f"nll_loss takes float log-probabilities [N, C] or [C], not {logp}")
    if target.dtype != "int64" or target.shape != logp.shape[:-1]:
        raise OpTypeError(
            f"nll_loss of {logp} takes int64 class indices of shape {list(logp.shape[:-1])}, "
            f"not {target}"
        )
    return TensorType(target.shape if reduction == "none" else (), logp.dtype)


def _nll_reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return F.nll_loss(x[0], x[1], reduction=a["reduction"], ignore_index=a["ignore_index"])


register("nll_loss", "reduction", 2, ("ignore_index", "reduction"), _nll_rule, _nll_reference,
         per_input(1))  # fmt: skip
