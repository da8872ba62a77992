"""The GPT-style decoder the model tests and the GPT example share, and its training step."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["GPT", "make_gpt_step"]

Batch = dict[str, torch.Tensor]


class _Attention(nn.Module):
    """Causal self-attention: fused qkv projection split in three, ``h`` heads; ``sdpa`` picks
    ``F.scaled_dot_product_attention`` over the explicit masked softmax."""

    mask: torch.Tensor

    def __init__(self, d: int, h: int, block: int, sdpa: bool):
        super().__init__()
        self.h, self.sdpa = h, sdpa
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.h) ** 0.5)
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _Block(nn.Module):
    def __init__(self, d: int, h: int, block: int, sdpa: bool):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = _Attention(d, h, block, sdpa)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and learned position embeddings, pre-LayerNorm decoder blocks, a tied lm head.

    Parameters
    ----------
    vocab, d, h, layers, block : int
        Vocabulary, width, heads, decoder blocks, longest sequence.
    sdpa : bool
        Attention through ``F.scaled_dot_product_attention`` (else masked softmax).
    """

    def __init__(self, vocab: int = 64, d: int = 32, h: int = 4, layers: int = 2,
                 block: int = 16, sdpa: bool = False):
        super().__init__()
        self.vocab = vocab
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(_Block(d, h, block, sdpa) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _, T = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(0, T, dtype=torch.long, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def make_gpt_step(model: GPT, opt: torch.optim.Optimizer, micro_batches: int = 2,
                  label_smoothing: float = 0.1,
                  max_norm: float | None = 1.0) -> Callable[[Batch], Batch]:
    """A training step over ``{"idx": [B, T], "y": [B, T]}``: the batch is sliced into
    ``micro_batches`` whose gradients accumulate (each loss divided by their number), clipped
    to ``max_norm`` (None: not clipped), then one ``opt.step()``; returns ``{"loss": ...}``,
    the mean micro-batch loss."""

    def step(d: Batch) -> Batch:
        opt.zero_grad()
        size = d["idx"].shape[0] // micro_batches
        total = torch.zeros(())
        for i in range(micro_batches):
            idx, y = d["idx"][i * size:(i + 1) * size], d["y"][i * size:(i + 1) * size]
            logits = model(idx)
            loss = F.cross_entropy(logits.reshape(-1, model.vocab), y.reshape(-1),
                                   label_smoothing=label_smoothing) / micro_batches
            loss.backward()
            total = total + loss.detach()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        return {"loss": total}

    return step
