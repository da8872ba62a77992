"""Handlers of ``aten.convolution`` (1-d and 2-d, any stride, padding, dilation and groups,
with or without a bias) and ``aten.convolution_backward``; transposed convolution
(``transposed=True``) is handed to :mod:`.conv_transpose`. ``im2col`` (``F.unfold``, ConvBERT's
span convolution) and ``col2im`` (``F.fold``, and ``im2col``'s backward) through torch's
decompositions (padding, an index gather, an accumulating index write)."""

from __future__ import annotations

from typing import Any

from torch import fx

from .args import tensor_arg, unsupported
from .conv_transpose import transposed_convolution, transposed_convolution_backward
from .registry import Builder, Unavailable, decompose, on

__all__: list[str] = []

decompose("im2col.default", "col2im.default")


def _attrs(n: fx.Node, a: dict[str, Any], rank: int) -> dict[str, Any]:
    """The IR attributes of a convolution call on a tensor of ``rank``; unsupported forms
    (output padding without ``transposed``, a rank other than 3 or 4) refused by name."""
    if not a["transposed"] and any(int(p) for p in a["output_padding"]):
        raise unsupported(n, f"output_padding={list(a['output_padding'])}")
    if rank not in (3, 4):
        raise unsupported(n, f"a rank-{rank} input (conv1d [N, C, L] and conv2d [N, C, H, W] "
                             "are supported)")
    spatial = rank - 2

    def per_dim(key: str) -> tuple[int, ...]:
        value = [int(v) for v in a[key]]
        return tuple(value * spatial if len(value) == 1 else value)

    return {"stride": per_dim("stride"), "padding": per_dim("padding"),
            "dilation": per_dim("dilation"), "groups": int(a["groups"])}


@on("convolution.default")
def _convolution(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
    x, w = tensor_arg(n, a["input"]), tensor_arg(n, a["weight"])
    rank = b.type(x).rank
    if a["transposed"]:
        return transposed_convolution(b, a, n, _attrs(n, a, rank))
    out = b.emit("conv", [x, w], **_attrs(n, a, rank))
    if a["bias"] is None:
        return out
    bias = tensor_arg(n, a["bias"])
    channels = b.type(bias).shape[0]
    view = b.emit("reshape", [bias], shape=(1, channels) + (1,) * (rank - 2))
    return b.emit("add", [out, view])


@on("convolution_backward.default")
def _convolution_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[Any, ...]:
    dy = tensor_arg(n, a["grad_output"])
    x, w = tensor_arg(n, a["input"]), tensor_arg(n, a["weight"])
    rank = b.type(x).rank
    attrs = _attrs(n, a, rank)
    if a["transposed"]:
        return transposed_convolution_backward(b, a, n, attrs)
    mask = [bool(m) for m in a["output_mask"]]
    missing = Unavailable(f"{n.name}: a gradient convolution_backward was not asked for")
    grad_input: Any = missing
    grad_weight: Any = missing
    grad_bias: Any = missing
    if mask[0]:
        grad_input = b.emit("conv_input_grad", [dy, w], input_shape=b.type(x).shape, **attrs)
    if mask[1]:
        grad_weight = b.emit("conv_weight_grad", [dy, x], weight_shape=b.type(w).shape, **attrs)
    if mask[2]:
        dims = (0,) + tuple(range(2, rank))
        grad_bias = b.emit("sum", [dy], dims=dims, keepdim=False)
    return grad_input, grad_weight, grad_bias
