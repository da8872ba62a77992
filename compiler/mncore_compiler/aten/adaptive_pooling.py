"""Handlers of adaptive max pooling (``adaptive_max_pool2d``, 1-d arriving as the 2-d one over
a unit dim) and its backward, onto the IR ops of the same kernels."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, Deferred, on

__all__: list[str] = []


def _output_size(n: fx.Node, value: Any) -> tuple[int, int]:
    items = [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
    if len(items) == 1:
        items = items * 2
    if len(items) != 2:
        raise unsupported(n, f"output_size={value!r} (give 1 or 2 ints)")
    return items[0], items[1]


@on("adaptive_max_pool2d.default")
def _adaptive_max(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    x, size = tensor_arg(n, a["self"]), _output_size(n, a["output_size"])
    # The indices are emitted only when a backward reads them (inference never does).
    return (b.emit("adaptive_max_pool", [x], output_size=size),
            Deferred(lambda: b.emit("adaptive_max_pool_indices", [x], output_size=size)))


@on("adaptive_max_pool2d_backward.default")
def _adaptive_max_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    operands = [tensor_arg(n, a[k]) for k in ("grad_output", "self", "indices")]
    return b.emit("adaptive_max_pool_backward", operands)
