"""Matrix products: ``matmul``, ``mixed_matmul`` (16-bit operands, float32 sums), ``addmm``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..types import TensorType, dtype_to_torch
from .registry import Attrs, OpTypeError, register
from .rules import broadcast_shapes, call_inline, is_scalar

__all__ = ["MIXED_OPERAND_DTYPES"]


def _matmul_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = types
    if a.rank < 2 or b.rank < 2:
        raise OpTypeError(f"matmul needs operands of rank >= 2, got {a} and {b}")
    if a.dtype != b.dtype:
        raise OpTypeError(f"matmul operands must have one dtype, got {a.dtype} and {b.dtype}")
    if a.shape[-1] != b.shape[-2]:
        raise OpTypeError(f"matmul inner sizes differ: {list(a.shape)} @ {list(b.shape)}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if batch is None:
        raise OpTypeError(f"matmul batch dims do not broadcast: {a} @ {b}")
    return TensorType(batch + (a.shape[-2], b.shape[-1]), a.dtype)


#: Operand precisions of ``mixed_matmul``: the 16-bit formats a matrix unit may read.
MIXED_OPERAND_DTYPES: tuple[str, ...] = ("float16", "bfloat16")


def _mixed_matmul_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    narrow = attrs["operand_dtype"]
    if narrow not in MIXED_OPERAND_DTYPES:
        raise OpTypeError(
            f"operand_dtype must be one of {list(MIXED_OPERAND_DTYPES)}, not {narrow!r}"
        )
    for t in types:
        if t.dtype not in ("float32", narrow):
            raise OpTypeError(
                f"mixed_matmul operands must be float32 or {narrow}, got {t.dtype}"
            )
    a, b = (TensorType(t.shape, "float32") for t in types)
    return _matmul_rule([a, b], attrs)


def _mixed_matmul(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    # Each operand rounded to the 16-bit format, then a float32 matmul: a product of two
    # float16 (or bfloat16) values is exact in float32, so this is float32 accumulation of
    # exact products, what a matrix unit with 16-bit inputs and a float32 accumulator does.
    narrow = dtype_to_torch(a["operand_dtype"])
    a16, b16 = (t.to(narrow).to(torch.float32) for t in x)
    return torch.matmul(a16, b16)


def _addmm_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    bias, a, b = types
    if a.rank != 2 or b.rank != 2:
        raise OpTypeError(f"addmm needs 2-d matrices, got {a} and {b}")
    for key in ("alpha", "beta"):
        if not is_scalar(attrs[key]):
            raise OpTypeError(f"{key} must be an int or float, not {attrs[key]!r}")
    result = _matmul_rule([a, b], attrs)
    if bias.dtype != result.dtype:
        raise OpTypeError(f"addmm bias dtype {bias.dtype} differs from matrices' {result.dtype}")
    if broadcast_shapes(bias.shape, result.shape) != result.shape:
        raise OpTypeError(f"addmm bias {list(bias.shape)} does not broadcast to {result}")
    return result


def _matmul_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return 2 * result.numel * types[1].shape[-2]


def _addmm_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return _matmul_flops(types[1:], attrs, result) + result.numel


register(
    "matmul", "matmul", 2, (), _matmul_rule, lambda x, a: torch.matmul(x[0], x[1]), _matmul_flops,
    call_inline(torch.matmul),
)


register(
    "mixed_matmul", "matmul", 2, ("operand_dtype",), _mixed_matmul_rule, _mixed_matmul,
    _matmul_flops,
)


register(
    "addmm", "matmul", 3, ("alpha", "beta"), _addmm_rule,
    lambda x, a: torch.addmm(x[0], x[1], x[2], beta=a["beta"], alpha=a["alpha"]), _addmm_flops,
)  # fmt: skip
