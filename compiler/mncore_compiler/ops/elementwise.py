"""Elementwise IR ops: unary, binary, with a scalar, casts, comparisons and ``where``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ..types import DTYPES, TensorType, dtype_to_torch
from .registry import Attrs, OpTypeError, Reference, register
from .rules import (
    binary_reference,
    broadcast,
    broadcast_shapes,
    call_inline,
    per_output,
    same,
    scalar_rule,
    to_float,
    unary_reference,
)

__all__ = ["COMPARISONS"]


def _float_unary_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return to_float(types[0])


def _div_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return to_float(broadcast(types, attrs))


def _div_scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return to_float(scalar_rule(types, attrs))


def _gelu_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if attrs["approximate"] not in ("none", "tanh"):
        raise OpTypeError(f"approximate must be 'none' or 'tanh', not {attrs['approximate']!r}")
    return types[0]


def _cast_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if attrs["dtype"] not in DTYPES:
        raise OpTypeError(f"dtype must be one of {list(DTYPES)}, not {attrs['dtype']!r}")
    return TensorType(types[0].shape, attrs["dtype"])


_UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], int]] = {
    "neg": (torch.neg, 1),
    "abs": (torch.abs, 1),
    "relu": (torch.relu, 1),
    "sign": (torch.sign, 1),
}


# These give float32 for integer operands, as in torch.
_FLOAT_UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], int]] = {
    "sigmoid": (torch.sigmoid, 4),
    "tanh": (torch.tanh, 4),
    "exp": (torch.exp, 4),
    "reciprocal": (torch.reciprocal, 1),
    "sqrt": (torch.sqrt, 4),
    "rsqrt": (torch.rsqrt, 4),
}


for _name, (_fn, _cost) in _UNARY.items():
    register(_name, "elementwise", 1, (), same, unary_reference(_fn), per_output(_cost))


for _name, (_fn, _cost) in _FLOAT_UNARY.items():
    register(_name, "elementwise", 1, (), _float_unary_rule, unary_reference(_fn),
             per_output(_cost))


register(
    "gelu", "elementwise", 1, ("approximate",), _gelu_rule,
    lambda x, a: F.gelu(x[0], approximate=a["approximate"]), per_output(8),
    lambda a, t: ("{fn}({0}, approximate={approximate})",
                  {"fn": F.gelu, "approximate": a["approximate"]}),
)  # fmt: skip


_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}


for _name, _fn2 in _BINARY.items():
    _rule = _div_rule if _name == "div" else broadcast
    register(_name, "elementwise", 2, (), _rule, binary_reference(_fn2), per_output(1))


register(
    "add_scalar", "elementwise", 1, ("scalar",), scalar_rule,
    lambda x, a: torch.add(x[0], a["scalar"]), per_output(1), call_inline(torch.add, "scalar"),
)  # fmt: skip


register(
    "mul_scalar", "elementwise", 1, ("scalar",), scalar_rule,
    lambda x, a: torch.mul(x[0], a["scalar"]), per_output(1), call_inline(torch.mul, "scalar"),
)  # fmt: skip


register(
    "sub_scalar", "elementwise", 1, ("reverse", "scalar"), scalar_rule,
    lambda x, a: torch.rsub(x[0], a["scalar"]) if a["reverse"] else torch.sub(x[0], a["scalar"]),
    per_output(1),
    lambda a, t: ("{fn}({0}, {scalar})",
                  {"fn": torch.rsub if a["reverse"] else torch.sub, "scalar": a["scalar"]}),
)  # fmt: skip


register(
    "div_scalar", "elementwise", 1, ("reverse", "scalar"), _div_scalar_rule,
    lambda x, a: a["scalar"] / x[0] if a["reverse"] else torch.div(x[0], a["scalar"]),
    per_output(1),
    lambda a, t: (("{scalar} / {0}", {"scalar": a["scalar"]}) if a["reverse"]
                  else ("{fn}({0}, {scalar})", {"fn": torch.div, "scalar": a["scalar"]})),
)  # fmt: skip


register(
    "cast", "cast", 1, ("dtype",), _cast_rule,
    lambda x, a: x[0].to(dtype_to_torch(a["dtype"])), per_output(1),
    lambda a, t: ("{0}.to({dtype})", {"dtype": dtype_to_torch(a["dtype"])}),
)  # fmt: skip


register("maximum", "elementwise", 2, (), broadcast, binary_reference(torch.maximum),
         per_output(1))  # fmt: skip


register("minimum", "elementwise", 2, (), broadcast, binary_reference(torch.minimum),
         per_output(1))  # fmt: skip


COMPARISONS: dict[str, Callable[..., torch.Tensor]] = {
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}
"""Comparison ops by IR name; each also has a ``<name>_scalar`` form."""


def _compare_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(broadcast(types, attrs).shape, "bool")


def _compare_scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(scalar_rule(types, attrs).shape, "bool")


def _compare_scalar(fn: Callable[..., torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0], a["scalar"])


for _name, _fn in COMPARISONS.items():
    register(_name, "elementwise", 2, (), _compare_rule, binary_reference(_fn), per_output(1))
    register(f"{_name}_scalar", "elementwise", 1, ("scalar",), _compare_scalar_rule,
             _compare_scalar(_fn), per_output(1), call_inline(_fn, "scalar"))


def _where_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    cond, x, y = types
    if cond.dtype != "bool":
        raise OpTypeError(f"where's condition must be a bool tensor, not {cond}")
    values = broadcast([x, y], attrs)
    shape = broadcast_shapes(cond.shape, values.shape)
    if shape is None:
        raise OpTypeError(
            f"where's condition {list(cond.shape)} does not broadcast with {list(values.shape)}")
    return TensorType(shape, values.dtype)


register(
    "where", "elementwise", 3, (), _where_rule,
    lambda x, a: torch.where(x[0], x[1], x[2]), per_output(1), call_inline(torch.where),
)  # fmt: skip
