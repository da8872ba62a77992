"""IR ops of integer and bool values: comparisons, where, argmax/argmin, amin, nll_loss.

Registered into :data:`mncore_compiler.ops.OPS` when that module is imported; each follows
torch's own dtype rules (comparisons give bool, indices int64, losses the log-probabilities'
float dtype).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .ir import FLOAT_IR_DTYPES, TensorType
from .ops import (
    Attrs,
    OpTypeError,
    Reference,
    _broadcast,
    _check_dim,
    _is_int,
    _per_input,
    _per_output,
    _reduce_rule,
    _reduction,
    _register,
    _scalar_rule,
)

__all__ = ["COMPARISONS", "NLL_REDUCTIONS"]

COMPARISONS: dict[str, Callable[..., torch.Tensor]] = {
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}
"""Comparison ops by IR name; each also has a ``<name>_scalar`` form."""

NLL_REDUCTIONS: tuple[str, ...] = ("none", "mean", "sum")
"""``nll_loss`` reductions, indexed as aten's ``reduction`` argument (0, 1, 2)."""


# -- comparisons --------------------------------------------------------------------------------


def _compare_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(_broadcast(types, attrs).shape, "bool")


def _compare_scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(_scalar_rule(types, attrs).shape, "bool")


def _compare(fn: Callable[..., torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0], x[1])


def _compare_scalar(fn: Callable[..., torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0], a["scalar"])


for _name, _fn in COMPARISONS.items():
    _register(_name, "elementwise", 2, (), _compare_rule, _compare(_fn), _per_output(1))
    _register(f"{_name}_scalar", "elementwise", 1, ("scalar",), _compare_scalar_rule,
              _compare_scalar(_fn), _per_output(1))


# -- where --------------------------------------------------------------------------------------


def _where_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    cond, x, y = types
    if cond.dtype != "bool":
        raise OpTypeError(f"where's condition must be a bool tensor, not {cond}")
    values = _broadcast([x, y], attrs)
    try:
        shape = tuple(torch.broadcast_shapes(cond.shape, values.shape))
    except RuntimeError:
        raise OpTypeError(
            f"where's condition {list(cond.shape)} does not broadcast with {list(values.shape)}"
        ) from None
    return TensorType(shape, values.dtype)


_register(
    "where", "elementwise", 3, (), _where_rule,
    lambda x, a: torch.where(x[0], x[1], x[2]), _per_output(1),
)  # fmt: skip


# -- argmax / argmin / amin ---------------------------------------------------------------------


def _arg_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dim, keepdim = attrs["dim"], attrs["keepdim"]
    if not isinstance(keepdim, bool):
        raise OpTypeError(f"keepdim must be a bool, not {keepdim!r}")
    if dim is None:
        return TensorType((1,) * x.rank if keepdim else (), "int64")
    _check_dim(dim, x.rank)
    if x.rank == 0:
        return TensorType((), "int64")
    if keepdim:
        shape = tuple(1 if i == dim else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
    return TensorType(shape, "int64")


def _arg(fn: Callable[..., torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0], dim=a["dim"], keepdim=a["keepdim"])


# Ties give the first index, as torch's argmax/argmin and max/min with a dim do.
_register("argmax", "reduction", 1, ("dim", "keepdim"), _arg_rule, _arg(torch.argmax),
          _per_input(1))  # fmt: skip
_register("argmin", "reduction", 1, ("dim", "keepdim"), _arg_rule, _arg(torch.argmin),
          _per_input(1))  # fmt: skip
_register("amin", "reduction", 1, ("dims", "keepdim"), _reduce_rule, _reduction(torch.amin),
          _per_input(1))  # fmt: skip


# -- nll_loss -----------------------------------------------------------------------------------


def _nll_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    logp, target = types
    reduction, ignore = attrs["reduction"], attrs["ignore_index"]
    if reduction not in NLL_REDUCTIONS:
        raise OpTypeError(f"reduction must be one of {list(NLL_REDUCTIONS)}, not {reduction!r}")
    if not _is_int(ignore):
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


_register("nll_loss", "reduction", 2, ("ignore_index", "reduction"), _nll_rule, _nll_reference,
          _per_input(1))  # fmt: skip
