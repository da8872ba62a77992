"""More elementwise IR ops: ``log``, ``sin``, ``cos``, ``erf``, ``pow``, ``clamp``,
``floor_divide``, the rounding ops (``floor``, ``ceil``, ``trunc``, ``round``) and the bitwise
ops, with torch's dtype rules and exact integer results."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..types import TensorType, dtype_from_torch
from .registry import Attrs, OpTypeError, register
from .rules import (
    binary_reference,
    broadcast,
    is_scalar,
    meta_tensor,
    per_output,
    to_float,
    unary_reference,
)

__all__: list[str] = []

_INTEGRAL = ("int32", "int64", "bool")


def _float_unary_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return to_float(types[0])


for _name, _fn, _cost in (("log", torch.log, 4), ("sin", torch.sin, 4), ("cos", torch.cos, 4),
                          ("erf", torch.erf, 8), ("log1p", torch.log1p, 4)):
    register(_name, "elementwise", 1, (), _float_unary_rule, unary_reference(_fn),
             per_output(_cost))


def _rounding_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if types[0].dtype == "bool":
        raise OpTypeError(f"rounding a bool tensor is not defined (torch refuses it): {types[0]}")
    return types[0]


# Each keeps its operand's dtype; an integer tensor is its own floor (torch returns a copy).
# ``round`` rounds half to even, as torch does.
for _name, _fn in (("floor", torch.floor), ("ceil", torch.ceil), ("trunc", torch.trunc),
                   ("round", torch.round)):
    register(_name, "elementwise", 1, (), _rounding_rule, unary_reference(_fn), per_output(1))


def _torch_rule(types: Sequence[TensorType], fn: Callable[..., torch.Tensor],
                *args: object) -> TensorType:
    """The result type torch gives ``fn`` on meta tensors of these types (and scalars)."""
    try:
        result = fn(*(meta_tensor(t) for t in types), *args)
    except (RuntimeError, TypeError) as exc:
        raise OpTypeError(f"{fn.__name__} of {', '.join(map(str, types))}: {exc}") from None
    return TensorType(tuple(result.shape), dtype_from_torch(result.dtype))


def _pow_scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    exponent, reverse = attrs["scalar"], attrs["reverse"]
    if not is_scalar(exponent) or not isinstance(reverse, bool):
        raise OpTypeError(f"pow_scalar takes a number and a bool reverse, not {exponent!r}, "
                          f"{reverse!r}")
    if reverse:
        return _torch_rule(types, lambda x: torch.pow(exponent, x))
    return _torch_rule(types, torch.pow, exponent)


def _pow_scalar(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    return torch.pow(a["scalar"], x[0]) if a["reverse"] else torch.pow(x[0], a["scalar"])


# reverse: scalar ** x (aten.pow.Scalar); else x ** scalar (aten.pow.Tensor_Scalar).
register("pow_scalar", "elementwise", 1, ("reverse", "scalar"), _pow_scalar_rule, _pow_scalar,
         per_output(4))  # fmt: skip


register("pow", "elementwise", 2, (), lambda t, a: _torch_rule(t, torch.pow),
         binary_reference(torch.pow), per_output(4))  # fmt: skip


def _clamp_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    low, high = attrs["min"], attrs["max"]
    for bound in (low, high):
        if bound is not None and not is_scalar(bound):
            raise OpTypeError(f"clamp bounds must be numbers or None, not {bound!r}")
    if low is None and high is None:
        raise OpTypeError("clamp needs a min or a max bound")
    return _torch_rule(types, lambda x: torch.clamp(x, low, high))


register(
    "clamp", "elementwise", 1, ("max", "min"), _clamp_rule,
    lambda x, a: torch.clamp(x[0], a["min"], a["max"]), per_output(2),
)  # fmt: skip


def _floor_divide_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    result = broadcast(types, attrs)
    if result.dtype == "bool":
        raise OpTypeError("floor_divide of two bool tensors is not defined (torch refuses it)")
    return result


# Integers divide exactly, rounding toward minus infinity (torch's floor_divide); division by
# an integer zero is torch's error in the reference.
register("floor_divide", "elementwise", 2, (), _floor_divide_rule,
         binary_reference(torch.floor_divide), per_output(2))  # fmt: skip


def _bitwise_unary_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if types[0].dtype not in _INTEGRAL:
        raise OpTypeError(f"bitwise_not takes an integer or bool tensor, not {types[0]}")
    return types[0]


register("bitwise_not", "elementwise", 1, (), _bitwise_unary_rule,
         unary_reference(torch.bitwise_not), per_output(1))  # fmt: skip


def _bitwise_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if any(t.dtype not in _INTEGRAL for t in types):
        raise OpTypeError(f"bitwise ops take integer or bool tensors, not "
                          f"{', '.join(map(str, types))}")
    return broadcast(types, attrs)


for _name, _fn2 in (("bitwise_and", torch.bitwise_and), ("bitwise_or", torch.bitwise_or),
                    ("bitwise_xor", torch.bitwise_xor)):
    register(_name, "elementwise", 2, (), _bitwise_rule, binary_reference(_fn2), per_output(1))


