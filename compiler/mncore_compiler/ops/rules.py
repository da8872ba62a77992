"""Shared pieces of op definitions: attribute checks, type rules, references, FLOP rules."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..types import FLOAT_IR_DTYPES, TensorType, dtype_from_torch
from .registry import Attrs, FlopRule, Inline, OpTypeError, Reference

__all__ = [
    "binary_reference",
    "broadcast",
    "call_inline",
    "broadcast_shapes",
    "check_dim",
    "check_shape",
    "is_int",
    "is_scalar",
    "meta_tensor",
    "no_flops",
    "numel",
    "per_input",
    "per_output",
    "reduce_rule",
    "reduction_inline",
    "reduction_reference",
    "same",
    "scalar_rule",
    "to_float",
    "unary_reference",
]


def is_int(value: Any) -> bool:
    """True for an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_scalar(value: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_dim(dim: Any, rank: int, what: str = "dim") -> None:
    """``OpTypeError`` unless ``dim`` is an int in ``[0, rank)`` (``[0, 1)`` for a 0-d tensor)."""
    # A 0-d tensor accepts dim 0 the way torch does for softmax and reductions.
    if not is_int(dim) or not 0 <= dim < max(rank, 1):
        raise OpTypeError(f"{what} must be an int in [0, {max(rank, 1)}), not {dim!r}")


def check_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """Return ``shape``; ``OpTypeError`` unless it is a tuple of non-negative ints."""
    if not isinstance(shape, tuple) or not all(is_int(d) and d >= 0 for d in shape):
        raise OpTypeError(f"{what} must be a list of non-negative ints, not {shape!r}")
    return shape


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of this shape."""
    return math.prod(shape)


def meta_tensor(t: TensorType) -> torch.Tensor:
    """An empty tensor of this type on the meta device, to ask torch its rules."""
    return torch.empty(t.shape, dtype=t.torch_dtype, device="meta")


def same(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Type rule: the result has the (only) operand's type."""
    return types[0]


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The shape ``a`` and ``b`` broadcast to, as ``torch.broadcast_shapes`` computes it (a
    size 1 takes the other's, 0 included); None when they do not broadcast. (Type rules run
    for every node at every verification: torch's own takes 30 times as long.)"""
    result = []
    for x, y in itertools.zip_longest(reversed(a), reversed(b), fillvalue=1):
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(reversed(result))


@functools.cache
def _promoted(a: str, a_scalar: bool, b: str, b_scalar: bool) -> str:
    # torch's promotion, including its rule that 0-d tensors do not widen the result: it
    # depends on the dtypes and on which operands are 0-d only.
    return dtype_from_torch(torch.result_type(meta_tensor(TensorType(() if a_scalar else (1,), a)),
                                              meta_tensor(TensorType(() if b_scalar else (1,), b))))


def broadcast(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Type rule of a binary op: operands broadcast, dtypes promote as torch does."""
    a, b = types
    shape = broadcast_shapes(a.shape, b.shape)
    if shape is None:
        raise OpTypeError(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast")
    return TensorType(shape, _promoted(a.dtype, a.rank == 0, b.dtype, b.rank == 0))


def scalar_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Type rule of an op with a ``scalar`` attribute (and maybe ``reverse``)."""
    if not is_scalar(attrs["scalar"]):
        raise OpTypeError(f"scalar must be an int or float, not {attrs['scalar']!r}")
    if "reverse" in attrs and not isinstance(attrs["reverse"], bool):
        raise OpTypeError(f"reverse must be a bool, not {attrs['reverse']!r}")
    # torch's promotion: an int tensor with a float scalar gives the default float dtype.
    dtype = torch.result_type(meta_tensor(types[0]), attrs["scalar"])
    return TensorType(types[0].shape, dtype_from_torch(dtype))


def to_float(t: TensorType) -> TensorType:
    """True division and float functions give float32 for integer and bool operands."""
    return t if t.dtype in FLOAT_IR_DTYPES else TensorType(t.shape, "float32")


def reduce_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Type rule of a reduction over ``dims`` (sorted, distinct) with ``keepdim``."""
    (x,) = types
    dims, keepdim = attrs["dims"], attrs["keepdim"]
    if not isinstance(dims, tuple) or list(dims) != sorted(set(dims)):
        raise OpTypeError(f"dims must be a sorted list of distinct ints, not {dims!r}")
    for dim in dims:
        check_dim(dim, x.rank, "each of dims")
    if not isinstance(keepdim, bool):
        raise OpTypeError(f"keepdim must be a bool, not {keepdim!r}")
    if keepdim:
        shape = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
    return TensorType(shape, x.dtype)


#: The dtypes an index tensor may have (torch's int64, and int32 from the kit's own tensors).
INDEX_DTYPES = ("int32", "int64")


def check_index(index: TensorType, what: str) -> None:
    """Raise OpTypeError unless ``index`` has an index dtype (``what`` names the op)."""
    if index.dtype not in INDEX_DTYPES:
        raise OpTypeError(f"{what} indices must be int32 or int64, not {index}")


def index_rows_rule(op: str) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    """The type rule of an op writing ``source``'s rows into ``base`` at a 1-D ``index``
    along ``dim`` (``index_add``, ``index_copy``): the source is base's shape with the index's
    length at ``dim`` and base's dtype; the result is base's type."""

    def rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        base, index, source = types
        dim = attrs["dim"]
        check_dim(dim, base.rank)
        check_index(index, op)
        expected = base.shape[:dim] + index.shape + base.shape[dim + 1:]
        if index.rank != 1 or source.shape != expected or source.dtype != base.dtype:
            raise OpTypeError(f"{op} into {base} along dim {dim} takes a 1-D index and a "
                              f"{list(expected)} {base.dtype} source, not {index} and {source}")
        return base

    return rule


def per_output(factor: int) -> FlopRule:
    """FLOP rule: ``factor`` per result element."""
    return lambda types, attrs, result: factor * result.numel


def per_input(factor: int) -> FlopRule:
    """FLOP rule: ``factor`` per element of the first operand."""
    return lambda types, attrs, result: factor * types[0].numel


def no_flops(types: Sequence[TensorType], attrs: Attrs, result: TensorType) -> int:
    """FLOP rule of data movement: none."""
    return 0


def unary_reference(fn: Callable[[torch.Tensor], torch.Tensor]) -> Reference:
    """Reference of a one-operand op without attributes: ``fn(x)`` (inlined as that call)."""
    def reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
        return fn(x[0])
    reference.inline = call_inline(fn)  # type: ignore[attr-defined]
    return reference


def binary_reference(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Reference:
    """Reference of a two-operand op without attributes: ``fn(x, y)`` (inlined as that
    call)."""
    def reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
        return fn(x[0], x[1])
    reference.inline = call_inline(fn)  # type: ignore[attr-defined]
    return reference


def call_inline(fn: Callable[..., torch.Tensor], *attrs: str) -> Inline:
    """The :attr:`~.registry.OpDef.inline` form of a reference ``fn(*operands, *(a[n] for n in
    attrs))``."""
    names = "".join(f", {{{n}}}" for n in attrs)
    template = "{fn}({xs}" + names + ")"
    return lambda a, result: (template, {"fn": fn, **{n: a[n] for n in attrs}})


def reduction_reference(fn: Callable[..., torch.Tensor]) -> Reference:
    """Reference of a reduction ``fn(x, dim=dims, keepdim=keepdim)``."""
    def reference(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
        if not a["dims"]:
            # torch reads an empty dim list as "all dims"; in the IR it means "none".
            return x[0].clone()
        return fn(x[0], dim=list(a["dims"]), keepdim=a["keepdim"])
    reference.inline = reduction_inline(fn)  # type: ignore[attr-defined]
    return reference


def reduction_inline(fn: Callable[..., torch.Tensor]
                     ) -> Callable[[Attrs, TensorType], tuple[str, dict[str, Any]]]:
    """The :attr:`~.registry.OpDef.inline` form of :func:`reduction_reference` ``(fn)``."""
    def inline(a: Attrs, result: TensorType) -> tuple[str, dict[str, Any]]:
        if not a["dims"]:
            return "{0}.clone()", {}
        return ("{fn}({0}, dim={dims}, keepdim={keepdim})",
                {"fn": fn, "dims": list(a["dims"]), "keepdim": a["keepdim"]})
    return inline
