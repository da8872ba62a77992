"""Reductions over dims: ``sum``, ``mean``, ``amax``, ``amin``, ``argmax``, ``argmin``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..types import FLOAT_IR_DTYPES, TensorType
from .registry import Attrs, OpTypeError, Reference, register
from .rules import check_dim, per_input, reduce_rule, reduction_inline, reduction_reference

__all__: list[str] = []


def _sum_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    result = reduce_rule(types, attrs)
    # torch sums integers and bools in int64 (counting True values, for instance).
    if result.dtype not in FLOAT_IR_DTYPES:
        return TensorType(result.shape, "int64")
    return result


_SUM = reduction_reference(torch.sum)


def _sum_reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    result = _SUM(x, a)
    return result if result.is_floating_point() else result.to(torch.int64)


_SUM_INLINE = reduction_inline(torch.sum)


def _sum_inline(a: Attrs, result: TensorType) -> tuple[str, dict[str, Any]]:
    # The declared type is the result's (checked on the first run): a float sum is torch's,
    # any other is converted to int64 (a no-op on torch's own int64 sum).
    text, bindings = _SUM_INLINE(a, result)
    if result.dtype in FLOAT_IR_DTYPES:
        return text, bindings
    return text + ".to({int64})", {**bindings, "int64": torch.int64}


register("sum", "reduction", 1, ("dims", "keepdim"), _sum_rule, _sum_reference,
         per_input(1), _sum_inline)  # fmt: skip


register("mean", "reduction", 1, ("dims", "keepdim"), reduce_rule, reduction_reference(torch.mean),
         per_input(1))  # fmt: skip


register("amax", "reduction", 1, ("dims", "keepdim"), reduce_rule, reduction_reference(torch.amax),
         per_input(1))  # fmt: skip


def _arg_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dim, keepdim = attrs["dim"], attrs["keepdim"]
    if not isinstance(keepdim, bool):
        raise OpTypeError(f"keepdim must be a bool, not {keepdim!r}")
    if dim is None:
        return TensorType((1,) * x.rank if keepdim else (), "int64")
    check_dim(dim, x.rank)
    if x.rank == 0:
        return TensorType((), "int64")
    if keepdim:
        shape = tuple(1 if i == dim else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
    return TensorType(shape, "int64")


def _arg(fn: Callable[..., torch.Tensor]) -> Reference:
    # torch's kernels take no bool tensor (cumprod's backward finds its first zero with one):
    # counted as 0 and 1.
    def reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
        operand = x[0].to(torch.int32) if x[0].dtype == torch.bool else x[0]
        return fn(operand, dim=a["dim"], keepdim=a["keepdim"])

    return reference


# Ties give the first index, as torch's argmax/argmin and max/min with a dim do.
register("argmax", "reduction", 1, ("dim", "keepdim"), _arg_rule, _arg(torch.argmax),
         per_input(1))  # fmt: skip


register("argmin", "reduction", 1, ("dim", "keepdim"), _arg_rule, _arg(torch.argmin),
         per_input(1))  # fmt: skip


register("amin", "reduction", 1, ("dims", "keepdim"), reduce_rule, reduction_reference(torch.amin),
         per_input(1))  # fmt: skip
