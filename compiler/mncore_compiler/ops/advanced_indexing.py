"""Tensor-indexed reads and writes: ``index`` (``x[i, :, j]``), ``index_put`` and ``index_copy``.

``index`` and ``index_put`` take their index tensors as operands after the data and an attribute
``dims`` naming the dims they index (the others are whole, ``:``), so ``x[:, i]`` is
``index(x, i, dims=(1,))``. Indices are int32 or int64 (a bool mask would give a
data-dependent shape); negative indices count from the end, as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..types import TensorType, dtype_from_torch
from .registry import Attrs, OpTypeError, register
from .rules import INDEX_DTYPES, check_dim, index_rows_rule, is_int, meta_tensor, no_flops

__all__: list[str] = []


def _check_dims(dims: object, rank: int, count: int, op: str) -> tuple[int, ...]:
    if (not isinstance(dims, tuple) or not all(is_int(d) for d in dims)
            or list(dims) != sorted(set(dims))):
        raise OpTypeError(f"{op}'s dims must be a sorted list of distinct ints, not {dims!r}")
    if len(dims) != count or count == 0:
        raise OpTypeError(f"{op} takes one index operand per entry of dims ({list(dims)}), "
                          f"and at least one; got {count}")
    for dim in dims:
        check_dim(dim, rank, f"each of {op}'s dims")
    return dims


def _index_key(dims: Sequence[int], indices: Sequence[torch.Tensor]) -> list[torch.Tensor | None]:
    """The index list torch's ``aten.index`` takes: None for a whole dim."""
    key: list[torch.Tensor | None] = [None] * (max(dims) + 1)
    for dim, index in zip(dims, indices, strict=True):
        key[dim] = index
    return key


def _indexed_type(x: TensorType, indices: Sequence[TensorType], dims: Sequence[int],
                  op: str) -> TensorType:
    for index in indices:
        if index.dtype not in INDEX_DTYPES:
            raise OpTypeError(f"{op} indices must be int32 or int64, not {index}")
    try:
        meta = torch.ops.aten.index.Tensor(
            meta_tensor(x), _index_key(dims, [meta_tensor(i) for i in indices]))
    except RuntimeError as exc:
        raise OpTypeError(f"{op}: indices {[str(i) for i in indices]} into {x}: {exc}") from None
    return TensorType(tuple(meta.shape), dtype_from_torch(meta.dtype))


def _index_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, *indices = types
    dims = _check_dims(attrs["dims"], x.rank, len(indices), "index")
    return _indexed_type(x, indices, dims, "index")


# x[key]: torch's advanced indexing (the indexed dims move to the front when they are not
# adjacent). An index out of range is torch's IndexError in the reference, as on the device.
register(
    "index", "layout", None, ("dims",), _index_rule,
    lambda x, a: torch.ops.aten.index.Tensor(x[0], _index_key(a["dims"], x[1:])), no_flops,
)  # fmt: skip


def _index_put_rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(types) < 3:
        raise OpTypeError(f"index_put takes the tensor, the values and at least one index, "
                          f"not {len(types)} operand(s)")
    x, values, *indices = types
    dims = _check_dims(attrs["dims"], x.rank, len(indices), "index_put")
    if not isinstance(attrs["accumulate"], bool):
        raise OpTypeError(f"accumulate must be a bool, not {attrs['accumulate']!r}")
    target = _indexed_type(x, indices, dims, "index_put")
    try:
        fits = torch.broadcast_shapes(values.shape, target.shape) == target.shape
    except RuntimeError:
        fits = False
    if values.dtype != x.dtype or not fits:
        raise OpTypeError(f"index_put into {x} writes {x.dtype} values that broadcast to the "
                          f"indexed {list(target.shape)}, not {values}")
    return x


def _index_put(x: Sequence[torch.Tensor], a: Attrs) -> torch.Tensor:
    key = _index_key(a["dims"], x[2:])
    return torch.ops.aten.index_put.default(x[0], key, x[1], a["accumulate"])


# A copy of x with values written at the indexed positions (added there with accumulate);
# with repeated positions and no accumulate, which write lands is torch's CPU kernel's choice.
register(
    "index_put", "elementwise", None, ("dims", "accumulate"), _index_put_rule, _index_put,
    lambda types, attrs, result: types[1].numel if attrs["accumulate"] else 0,
)  # fmt: skip


# A static KV cache's write: the rows of source replace base's rows at index along dim.
register(
    "index_copy", "layout", 3, ("dim",), index_rows_rule("index_copy"),
    lambda x, a: torch.index_copy(x[0], a["dim"], x[1].long(), x[2]), no_flops,
)  # fmt: skip
