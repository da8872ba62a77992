"""Handlers of ``F.scaled_dot_product_attention`` as torch traces it on the CPU
(``_scaled_dot_product_flash_attention_for_cpu`` and its backward), as its matmuls and softmax.

Forward, for ``q [B, H, L, E]``, ``k [B, H, S, E]``, ``v [B, H, S, Ev]``: scores
``s = q @ k^T * scale`` (``scale`` defaults to ``1 / sqrt(E)``), masked to ``-inf`` above the
diagonal when ``is_causal`` and where a bool ``attn_mask`` is False (a float mask is added),
``p = softmax(s)`` (0 in a row the mask hides entirely, as torch computes it),
``out = p @ v``; torch also returns ``logsumexp(s)`` for its backward.
Backward recomputes ``p`` from ``q`` and ``k`` (as flash attention does):
``dv = p^T @ dout``, ``dp = dout @ v^T``, ``ds = p * (dp - sum(dout * out))``,
``dq = ds @ k * scale``, ``dk = ds^T @ q * scale``. Dropout must be 0.

Grouped-query attention (``enable_gqa=True``: ``k`` and ``v`` with ``H / g`` heads): each key
and value head serves ``g`` consecutive query heads, so ``k`` and ``v`` are repeated ``g``
times along the head axis (torch's ``repeat_interleave``) and their gradients summed over the
``g`` query heads each one served.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from .args import tensor_arg, unsupported
from .registry import Builder, Deferred, on

__all__: list[str] = []


def _transposed(b: Builder, x: str) -> str:
    rank = b.type(x).rank
    return b.emit("permute", [x], dims=(*range(rank - 2), rank - 1, rank - 2))


def _check(n: fx.Node, b: Builder, q: str, k: str, a: dict[str, Any]) -> tuple[float, int]:
    """The scale and the query heads per key head; unsupported for dropout, different batch
    shapes, or a query head count that is no multiple of the key's."""
    if float(a["dropout_p"]) != 0.0:
        raise unsupported(n, f"dropout_p={a['dropout_p']} (only 0 is supported)")
    qt, kt = b.type(q), b.type(k)
    heads = (qt.shape[-3], kt.shape[-3]) if qt.rank >= 3 else (1, 1)
    if qt.shape[:-3] != kt.shape[:-3] or heads[0] % heads[1]:
        raise unsupported(n, f"query {list(qt.shape)} and key {list(kt.shape)} with different "
                             "batch counts, or query heads no multiple of key heads")
    scale = a.get("scale")
    return (1.0 / math.sqrt(qt.shape[-1]) if scale is None else float(scale),
            heads[0] // heads[1])


def _repeat_heads(b: Builder, x: str, groups: int) -> str:
    """``x [..., Hk, S, E]`` with each head repeated ``groups`` times: ``[..., Hk * g, S, E]``."""
    if groups == 1:
        return x
    *batch, heads, length, width = b.type(x).shape
    spread = b.emit("reshape", [x], shape=(*batch, heads, 1, length, width))
    wide = b.emit("expand", [spread], shape=(*batch, heads, groups, length, width))
    return b.emit("reshape", [wide], shape=(*batch, heads * groups, length, width))


def _sum_heads(b: Builder, grad: str, groups: int) -> str:
    """The gradient of :func:`_repeat_heads`: ``grad`` summed over each head's ``groups``."""
    if groups == 1:
        return grad
    *batch, heads, length, width = b.type(grad).shape
    split = b.emit("reshape", [grad], shape=(*batch, heads // groups, groups, length, width))
    return b.emit("sum", [split], dims=(len(batch) + 1,), keepdim=False)


def _probabilities(b: Builder, n: fx.Node, q: str, k: str, a: dict[str, Any],
                   scale: float) -> tuple[str, str]:
    """The masked, scaled scores and their softmax."""
    scores = b.emit("mul_scalar", [b.emit("matmul", [q, _transposed(b, k)])], scalar=scale)
    length, source = b.type(scores).shape[-2:]
    dtype = b.type(scores).torch_dtype
    minus_inf = b.constant(torch.tensor(float("-inf"), dtype=dtype), f"{n.name}_minus_inf")
    if a["is_causal"]:
        causal = torch.ones(length, source, dtype=torch.bool).tril()
        keep = b.constant(causal, f"{n.name}_causal")
        scores = b.emit("where", [keep, scores, minus_inf])
    mask = a.get("attn_mask")
    if mask is not None:
        mask = tensor_arg(n, mask)
        if b.type(mask).dtype == "bool":
            scores = b.emit("where", [mask, scores, minus_inf])
        else:
            scores = b.emit("add", [scores, mask])
    last = b.type(scores).rank - 1
    p = b.emit("softmax", [scores], dim=last)
    if mask is not None:
        # A row the mask hides entirely (a left-padded query) attends to nothing: torch gives
        # zeros there, where a plain softmax of -inf scores would give NaN.
        top = b.emit("amax", [scores], dims=(last,), keepdim=True)
        hidden = b.emit("eq_scalar", [top], scalar=float("-inf"))
        zero = b.constant(torch.tensor(0.0, dtype=dtype), f"{n.name}_zero")
        p = b.emit("where", [hidden, zero, p])
    return scores, p


def _logsumexp(b: Builder, scores: str) -> str:
    last = b.type(scores).rank - 1
    top = b.emit("amax", [scores], dims=(last,), keepdim=True)
    exp = b.emit("exp", [b.emit("sub", [scores, top])])
    total = b.emit("log", [b.emit("sum", [exp], dims=(last,), keepdim=True)])
    return b.emit("reshape", [b.emit("add", [total, top])], shape=b.type(scores).shape[:-1])


@on("_scaled_dot_product_flash_attention_for_cpu.default")
def _attention(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, Deferred]:
    q, k, v = (tensor_arg(n, a[key]) for key in ("query", "key", "value"))
    scale, groups = _check(n, b, q, k, a)
    k, v = _repeat_heads(b, k, groups), _repeat_heads(b, v, groups)
    scores, p = _probabilities(b, n, q, k, a, scale)
    return b.emit("matmul", [p, v]), Deferred(lambda: _logsumexp(b, scores))


@on("_scaled_dot_product_flash_attention_for_cpu_backward.default")
def _attention_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str, str]:
    dout, q, k, v, out = (tensor_arg(n, a[key]) for key in
                          ("grad_out", "query", "key", "value", "out"))
    scale, groups = _check(n, b, q, k, a)
    k, v = _repeat_heads(b, k, groups), _repeat_heads(b, v, groups)
    _, p = _probabilities(b, n, q, k, a, scale)
    dv = b.emit("matmul", [_transposed(b, p), dout])
    dp = b.emit("matmul", [dout, _transposed(b, v)])
    last = b.type(out).rank - 1
    rowdot = b.emit("sum", [b.emit("mul", [dout, out])], dims=(last,), keepdim=True)
    ds = b.emit("mul", [p, b.emit("sub", [dp, rowdot])])
    dq = b.emit("mul_scalar", [b.emit("matmul", [ds, k])], scalar=scale)
    dk = b.emit("mul_scalar", [b.emit("matmul", [_transposed(b, ds), q])], scalar=scale)
    return dq, _sum_heads(b, dk, groups), _sum_heads(b, dv, groups)
