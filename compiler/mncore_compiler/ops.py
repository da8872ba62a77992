"""The IR op table: per op, its type rule, its torch reference implementation and its FLOPs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .ir import DTYPES, FLOAT_IR_DTYPES, TensorType, dtype_from_torch, dtype_to_torch

__all__ = ["MIXED_OPERAND_DTYPES", "OPS", "OpDef", "OpTypeError", "get_op", "infer_type"]

Attrs = Mapping[str, Any]
InferRule = Callable[[Sequence[TensorType], Attrs], TensorType]
Reference = Callable[[Sequence[torch.Tensor], Attrs], torch.Tensor]
FlopRule = Callable[[Sequence[TensorType], Attrs, TensorType], int]


class OpTypeError(ValueError):
    """Operands or attributes an op's type rule rejects."""


@dataclass(frozen=True)
class OpDef:
    """Everything the compiler knows about one IR op.

    Parameters
    ----------
    name : str
        The op name used in :class:`~mncore_compiler.ir.Node`.
    kind : str
        Coarse class: ``"elementwise"``, ``"matmul"``, ``"reduction"``, ``"normalization"``,
        ``"layout"`` (data movement only) or ``"cast"``.
    arity : int or None
        Number of tensor operands; ``None`` for one or more.
    attrs : tuple of str
        The attribute names every node of this op carries (no more, no fewer).
    rule : callable
        ``rule(operand_types, attrs) -> TensorType``; raises :class:`OpTypeError`.
    reference : callable
        ``reference(tensors, attrs) -> torch.Tensor``: the executable specification.
    flop_rule : callable
        ``flop_rule(operand_types, attrs, result_type) -> int``: a rough FLOP count.
    """

    name: str
    kind: str
    arity: int | None
    attrs: tuple[str, ...]
    rule: InferRule
    reference: Reference
    flop_rule: FlopRule

    def infer(self, operand_types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        """Check operand count and attribute names, then apply the type rule."""
        count = len(operand_types)
        if self.arity is None and count < 1:
            raise OpTypeError(f"{self.name} takes one or more operands, got none")
        if self.arity is not None and count != self.arity:
            raise OpTypeError(f"{self.name} takes {self.arity} operand(s), got {count}")
        if set(attrs) != set(self.attrs):
            raise OpTypeError(
                f"{self.name} takes attributes {sorted(self.attrs)}, got {sorted(attrs)}"
            )
        return self.rule(operand_types, attrs)

    def flops(self, operand_types: Sequence[TensorType], attrs: Attrs) -> int:
        """Return the rough FLOP count of one execution."""
        return self.flop_rule(operand_types, attrs, self.infer(operand_types, attrs))


OPS: dict[str, OpDef] = {}
"""Every IR op, by name."""


def get_op(name: str) -> OpDef:
    """Return the op definition; ``KeyError`` listing the known ops for an unknown name."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def infer_type(op: str, operand_types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Return the result type of ``op`` applied to operands of these types."""
    return get_op(op).infer(operand_types, attrs)


def _register(
    name: str,
    kind: str,
    arity: int | None,
    attrs: tuple[str, ...],
    rule: InferRule,
    reference: Reference,
    flop_rule: FlopRule,
) -> None:
    OPS[name] = OpDef(name, kind, arity, attrs, rule, reference, flop_rule)


# -- attribute checks ---------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_dim(dim: Any, rank: int, what: str = "dim") -> None:
    # A 0-d tensor accepts dim 0 the way torch does for softmax and reductions.
    if not _is_int(dim) or not 0 <= dim < max(rank, 1):
        raise OpTypeError(f"{what} must be an int in [0, {max(rank, 1)}), not {dim!r}")


def _check_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    if not isinstance(shape, tuple) or not all(_is_int(d) and d >= 0 for d in shape):
        raise OpTypeError(f"{what} must be a list of non-negative ints, not {shape!r}")
    return shape


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


# -- type rules ---------------------------------------------------------------------------------


def _meta(t: TensorType) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.torch_dtype, device="meta")


def _same(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return types[0]


def _broadcast(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = types
    try:
        shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    except RuntimeError:
        raise OpTypeError(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    # torch's promotion, including its rule that 0-d tensors do not widen the result.
    dtype = dtype_from_torch(torch.result_type(_meta(a), _meta(b)))
    return TensorType(shape, dtype)


def _scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if not _is_scalar(attrs["scalar"]):
        raise OpTypeError(f"scalar must be an int or float, not {attrs['scalar']!r}")
    if "reverse" in attrs and not isinstance(attrs["reverse"], bool):
        raise OpTypeError(f"reverse must be a bool, not {attrs['reverse']!r}")
    # torch's promotion: an int tensor with a float scalar gives the default float dtype.
    dtype = torch.result_type(_meta(types[0]), attrs["scalar"])
    return TensorType(types[0].shape, dtype_from_torch(dtype))


def _to_float(t: TensorType) -> TensorType:
    """True division and float functions give float32 for integer and bool operands."""
    return t if t.dtype in FLOAT_IR_DTYPES else TensorType(t.shape, "float32")


def _float_unary_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _to_float(types[0])


def _div_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _to_float(_broadcast(types, attrs))


def _div_scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _to_float(_scalar_rule(types, attrs))


def _gelu_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if attrs["approximate"] not in ("none", "tanh"):
        raise OpTypeError(f"approximate must be 'none' or 'tanh', not {attrs['approximate']!r}")
    return types[0]


def _cast_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if attrs["dtype"] not in DTYPES:
        raise OpTypeError(f"dtype must be one of {list(DTYPES)}, not {attrs['dtype']!r}")
    return TensorType(types[0].shape, attrs["dtype"])


def _matmul_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = types
    if a.rank < 2 or b.rank < 2:
        raise OpTypeError(f"matmul needs operands of rank >= 2, got {a} and {b}")
    if a.dtype != b.dtype:
        raise OpTypeError(f"matmul operands must have one dtype, got {a.dtype} and {b.dtype}")
    if a.shape[-1] != b.shape[-2]:
        raise OpTypeError(f"matmul inner sizes differ: {list(a.shape)} @ {list(b.shape)}")
    try:
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except RuntimeError:
        raise OpTypeError(f"matmul batch dims do not broadcast: {a} @ {b}") from None
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
        if not _is_scalar(attrs[key]):
            raise OpTypeError(f"{key} must be an int or float, not {attrs[key]!r}")
    result = _matmul_rule([a, b], attrs)
    if bias.dtype != result.dtype:
        raise OpTypeError(f"addmm bias dtype {bias.dtype} differs from matrices' {result.dtype}")
    try:
        shape = tuple(torch.broadcast_shapes(bias.shape, result.shape))
    except RuntimeError:
        shape = ()
    if shape != result.shape:
        raise OpTypeError(f"addmm bias {list(bias.shape)} does not broadcast to {result}")
    return result


def _reduce_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dims, keepdim = attrs["dims"], attrs["keepdim"]
    if not isinstance(dims, tuple) or list(dims) != sorted(set(dims)):
        raise OpTypeError(f"dims must be a sorted list of distinct ints, not {dims!r}")
    for dim in dims:
        _check_dim(dim, x.rank, "each of dims")
    if not isinstance(keepdim, bool):
        raise OpTypeError(f"keepdim must be a bool, not {keepdim!r}")
    if keepdim:
        shape = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
    return TensorType(shape, x.dtype)


def _sum_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    result = _reduce_rule(types, attrs)
    # torch sums integers and bools in int64 (counting True values, for instance).
    if result.dtype not in FLOAT_IR_DTYPES:
        return TensorType(result.shape, "int64")
    return result


def _softmax_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check_dim(attrs["dim"], types[0].rank)
    return types[0]


def _reshape_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    shape = _check_shape(attrs["shape"])
    if _numel(shape) != x.numel:
        raise OpTypeError(f"cannot reshape {x} ({x.numel} elements) to {list(shape)}")
    return TensorType(shape, x.dtype)


def _permute_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    dims = attrs["dims"]
    if not isinstance(dims, tuple) or sorted(dims) != list(range(x.rank)):
        raise OpTypeError(f"dims must be a permutation of 0..{x.rank - 1}, not {dims!r}")
    return TensorType(tuple(x.shape[d] for d in dims), x.dtype)


def _expand_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    shape = _check_shape(attrs["shape"])
    lead = len(shape) - x.rank
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise OpTypeError(f"cannot expand {x} to {list(shape)}")
    return TensorType(shape, x.dtype)


def _cat_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    first = types[0]
    dim = attrs["dim"]
    if first.rank == 0:
        raise OpTypeError("cat needs operands of rank >= 1")
    _check_dim(dim, first.rank)
    dtype = first.torch_dtype
    for t in types[1:]:
        others = [d for i, d in enumerate(t.shape) if i != dim]
        if t.rank != first.rank or others != [d for i, d in enumerate(first.shape) if i != dim]:
            raise OpTypeError(f"cat operands {first} and {t} differ outside dim {dim}")
        dtype = torch.promote_types(dtype, t.torch_dtype)
    size = sum(t.shape[dim] for t in types)
    shape = first.shape[:dim] + (size,) + first.shape[dim + 1 :]
    return TensorType(shape, dtype_from_torch(dtype))


# -- FLOP rules ---------------------------------------------------------------------------------


def _per_output(factor: int) -> FlopRule:
    return lambda types, attrs, result: factor * result.numel


def _per_input(factor: int) -> FlopRule:
    return lambda types, attrs, result: factor * types[0].numel


def _no_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return 0


def _matmul_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return 2 * result.numel * types[1].shape[-2]


def _addmm_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    return _matmul_flops(types[1:], attrs, result) + result.numel


# -- the table ----------------------------------------------------------------------------------

_UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], int]] = {
    "neg": (torch.neg, 1),
    "abs": (torch.abs, 1),
    "relu": (torch.relu, 1),
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


def _unary_reference(fn: Callable[[torch.Tensor], torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0])


def _binary_reference(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Reference:
    return lambda x, a: fn(x[0], x[1])


for _name, (_fn, _cost) in _UNARY.items():
    _register(_name, "elementwise", 1, (), _same, _unary_reference(_fn), _per_output(_cost))
for _name, (_fn, _cost) in _FLOAT_UNARY.items():
    _register(_name, "elementwise", 1, (), _float_unary_rule, _unary_reference(_fn),
              _per_output(_cost))

_register(
    "gelu", "elementwise", 1, ("approximate",), _gelu_rule,
    lambda x, a: F.gelu(x[0], approximate=a["approximate"]), _per_output(8),
)  # fmt: skip

_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}
for _name, _fn2 in _BINARY.items():
    _rule = _div_rule if _name == "div" else _broadcast
    _register(_name, "elementwise", 2, (), _rule, _binary_reference(_fn2), _per_output(1))

_register(
    "add_scalar", "elementwise", 1, ("scalar",), _scalar_rule,
    lambda x, a: torch.add(x[0], a["scalar"]), _per_output(1),
)  # fmt: skip
_register(
    "mul_scalar", "elementwise", 1, ("scalar",), _scalar_rule,
    lambda x, a: torch.mul(x[0], a["scalar"]), _per_output(1),
)  # fmt: skip
_register(
    "sub_scalar", "elementwise", 1, ("reverse", "scalar"), _scalar_rule,
    lambda x, a: torch.rsub(x[0], a["scalar"]) if a["reverse"] else torch.sub(x[0], a["scalar"]),
    _per_output(1),
)  # fmt: skip
_register(
    "div_scalar", "elementwise", 1, ("reverse", "scalar"), _div_scalar_rule,
    lambda x, a: a["scalar"] / x[0] if a["reverse"] else torch.div(x[0], a["scalar"]),
    _per_output(1),
)  # fmt: skip
_register(
    "cast", "cast", 1, ("dtype",), _cast_rule,
    lambda x, a: x[0].to(dtype_to_torch(a["dtype"])), _per_output(1),
)  # fmt: skip
_register(
    "matmul", "matmul", 2, (), _matmul_rule, lambda x, a: torch.matmul(x[0], x[1]), _matmul_flops
)
_register(
    "mixed_matmul", "matmul", 2, ("operand_dtype",), _mixed_matmul_rule, _mixed_matmul,
    _matmul_flops,
)
_register(
    "addmm", "matmul", 3, ("alpha", "beta"), _addmm_rule,
    lambda x, a: torch.addmm(x[0], x[1], x[2], beta=a["beta"], alpha=a["alpha"]), _addmm_flops,
)  # fmt: skip


def _reduction(fn: Callable[..., torch.Tensor]) -> Reference:
    def reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
        if not a["dims"]:
            # torch reads an empty dim list as "all dims"; in the IR it means "none".
            return x[0].clone()
        return fn(x[0], dim=list(a["dims"]), keepdim=a["keepdim"])

    return reference


def _sum_reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    result = _reduction(torch.sum)(x, a)
    return result if result.is_floating_point() else result.to(torch.int64)


_register("sum", "reduction", 1, ("dims", "keepdim"), _sum_rule, _sum_reference,
          _per_input(1))  # fmt: skip
_register("mean", "reduction", 1, ("dims", "keepdim"), _reduce_rule, _reduction(torch.mean),
          _per_input(1))  # fmt: skip
_register("amax", "reduction", 1, ("dims", "keepdim"), _reduce_rule, _reduction(torch.amax),
          _per_input(1))  # fmt: skip
_register(
    "softmax", "normalization", 1, ("dim",), _softmax_rule,
    lambda x, a: torch.softmax(x[0], a["dim"]), _per_input(5),
)  # fmt: skip
_register(
    "log_softmax", "normalization", 1, ("dim",), _softmax_rule,
    lambda x, a: torch.log_softmax(x[0], a["dim"]), _per_input(5),
)  # fmt: skip
_register(
    "reshape", "layout", 1, ("shape",), _reshape_rule,
    lambda x, a: x[0].reshape(a["shape"]), _no_flops,
)  # fmt: skip
_register(
    "permute", "layout", 1, ("dims",), _permute_rule,
    lambda x, a: x[0].permute(a["dims"]), _no_flops,
)  # fmt: skip
_register(
    "expand", "layout", 1, ("shape",), _expand_rule,
    lambda x, a: x[0].expand(a["shape"]), _no_flops,
)  # fmt: skip
_register(
    "cat", "layout", None, ("dim",), _cat_rule,
    lambda x, a: torch.cat(list(x), dim=a["dim"]), _no_flops,
)  # fmt: skip


# Comparisons, where, argmax/argmin, amin and nll_loss (_ops_int); maximum / minimum, what
# optimizers need beyond the forward ops (_ops_train).
from . import _ops_int, _ops_train  # noqa: E402, F401
