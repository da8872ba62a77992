"""Padding: ``constant_pad_nd`` (``F.pad(mode="constant")``, its backward and negative pads:
slices), and the reflect, replicate and circular modes (forward and backward) through the
kit's decompositions: one ``index_select`` of constant positions per padded dim."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from .args import scalar_for, tensor_arg, unsupported
from .registry import Builder, decompose_as, on

__all__: list[str] = []


def _positions(mode: str, size: int, left: int, right: int) -> list[int]:
    """The source index of each position of a dim of ``size`` padded by (left, right)."""
    inner = list(range(size))
    if mode == "reflect":
        if max(left, right) >= size:
            raise ValueError(f"reflect padding ({left}, {right}) must be smaller than the "
                             f"dim it pads ({size})")
        return inner[left:0:-1] + inner + inner[-2:-2 - right:-1]
    if mode == "replicate":
        return [0] * left + inner + [size - 1] * right
    if max(left, right) > size:  # circular
        raise ValueError(f"circular padding ({left}, {right}) must be at most the dim it pads "
                         f"({size})")
    return inner[size - left:] + inner + inner[:right]


def _dims(x: torch.Tensor, pad: list[int]) -> list[tuple[int, int, int]]:
    # (dim, left, right) per padded dim, the last dim first, as torch's pad lists them.
    return [(x.dim() - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]


def _index(positions: list[int]) -> torch.Tensor:
    return torch.tensor(positions, dtype=torch.int64)


def _padded(mode: str) -> Any:
    # Each padded dim is one index_select of its positions (its backward, an index_add).
    def pad(x: torch.Tensor, padding: list[int]) -> torch.Tensor:
        for dim, left, right in _dims(x, list(padding)):
            if min(left, right) < 0:
                raise ValueError(f"{mode} padding takes no negative pad, not {list(padding)}")
            x = torch.index_select(x, dim, _index(_positions(mode, x.shape[dim], left, right)))
        return x

    return pad


def _padded_backward(mode: str) -> Any:
    # The gradient of each source position is the sum of those of the positions copied from it.
    def backward(grad: torch.Tensor, x: torch.Tensor, padding: list[int]) -> torch.Tensor:
        shapes = [tuple(x.shape)]
        for dim, left, right in _dims(x, list(padding)):
            shape = list(shapes[-1])
            shape[dim] += left + right
            shapes.append(tuple(shape))
        for (dim, left, right), before in zip(reversed(_dims(x, list(padding))),
                                              reversed(shapes[:-1]), strict=True):
            index = _index(_positions(mode, before[dim], left, right))
            grad = torch.zeros(before, dtype=grad.dtype).index_add(dim, index, grad)
        return grad

    return backward


for _d in (1, 2, 3):
    decompose_as(f"reflection_pad{_d}d.default")(_padded("reflect"))
    decompose_as(f"replication_pad{_d}d.default")(_padded("replicate"))
    decompose_as(f"reflection_pad{_d}d_backward.default")(_padded_backward("reflect"))
    decompose_as(f"replication_pad{_d}d_backward.default")(_padded_backward("replicate"))
decompose_as("_pad_circular.default")(_padded("circular"))


@on("constant_pad_nd.default")
def _constant_pad_nd(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # pad = (left of the last dim, right of it, left of the one before, ...): a negative pad
    # crops (a slice), a positive one joins a block of `value` (a cat).
    x = tensor_arg(n, a["self"])
    pad = [int(p) for p in a["pad"]]
    rank = b.type(x).rank
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise unsupported(n, f"pad={pad} for a {rank}-d tensor")
    value = a.get("value", 0)
    for pair in range(len(pad) // 2):
        dim = rank - 1 - pair
        x = _pad_dim(b, n, x, dim, pad[2 * pair], pad[2 * pair + 1], value)
    return x


def _pad_dim(b: Builder, n: fx.Node, x: str, dim: int, left: int, right: int,
             value: Any) -> str:
    shape = b.type(x).shape
    start, end = max(-left, 0), shape[dim] - max(-right, 0)
    if end < start:
        raise unsupported(n, f"pads cropping dim {dim} of size {shape[dim]} below zero")
    if (start, end) != (0, shape[dim]):
        x = b.emit("slice", [x], dim=dim, start=start, end=end, step=1)
    parts = [x]
    if left > 0:
        parts.insert(0, _block(b, n, x, dim, left, value))
    if right > 0:
        parts.append(_block(b, n, x, dim, right, value))
    return x if len(parts) == 1 else b.emit("cat", parts, dim=dim)


def _block(b: Builder, n: fx.Node, x: str, dim: int, size: int, value: Any) -> str:
    kind = b.type(x)
    shape = kind.shape[:dim] + (size,) + kind.shape[dim + 1:]
    fill = scalar_for(b, n, x, value) if not isinstance(value, bool) else value
    return b.constant(torch.full(shape, fill, dtype=kind.torch_dtype), f"{n.name}_pad")
