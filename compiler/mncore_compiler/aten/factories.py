"""Handlers of factories and fills: evaluated at capture, held as constants.

The handler of an in-place fill (``zero_``, ``fill_``, ``copy_``) returns the *new value* of the
tensor it writes; :mod:`mncore_compiler.functionalize` does the write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import fx

from .args import scalar_arg, tensor_arg
from .registry import Builder, Unavailable, on

__all__: list[str] = []


@on("full.default", "zeros.default", "ones.default", "scalar_tensor.default")
def _factory(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    factory = cast(Callable[..., torch.Tensor], n.target)
    return b.constant(factory(*n.args, **n.kwargs), n.name)


def _val(node: fx.Node) -> torch.Tensor:
    return node.meta["val"]


def _filled(b: Builder, n: fx.Node, value: float) -> str:
    val = _val(n)
    return b.constant(torch.full(tuple(val.shape), value, dtype=val.dtype), n.name)


@on("ones_like.default", "new_ones.default")
def _ones_like(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 1)


@on("zeros_like.default", "empty_like.default", "new_zeros.default", "new_empty.default",
     "zero.default")
def _zeros_like(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 0)


@on("full_like.default", "new_full.default")
def _full_like(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, scalar_arg(n, a["fill_value"]))


@on("zero_.default")
def _zero_(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, 0)


@on("fill_.Scalar")
def _fill_scalar(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    return _filled(b, n, scalar_arg(n, a["value"]))


@on("fill_.Tensor", "copy_.default")
def _copy_(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    # The converter casts and broadcasts the source to the destination's type.
    return tensor_arg(n, a["value"] if "value" in a else a["src"])


@on("empty.memory_format")
def _empty(b: Builder, a: dict[str, Any], n: fx.Node) -> Any:
    # F.batch_norm makes an empty reserve tensor torch.empty(0) and never reads it.
    val = n.meta["val"]
    if val.numel() == 0:
        return Unavailable(f"{n.name} is an empty tensor; the MN-Core compiler holds no "
                           "zero-size tensors")
    return b.constant(torch.zeros(tuple(val.shape), dtype=val.dtype), n.name)
