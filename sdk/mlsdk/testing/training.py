"""The small training problems the training tests share: a linear model with an MSE loss
(``"mse"``) and a two-layer MLP with cross-entropy over int64 class labels (``"xent"``), their
batches, and the compiled step's function (zero_grad, forward, loss, backward, step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["KINDS", "loss_for", "make_batches", "make_train_step", "mlp", "model_for",
           "sgd_with_momentum"]

#: The two problems.
KINDS = ("mse", "xent")

Batch = dict[str, torch.Tensor]


def mlp() -> torch.nn.Module:
    """6 -> 16 -> ReLU -> 4."""
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def model_for(kind: str) -> torch.nn.Module:
    """``nn.Linear(6, 4)`` for ``"mse"``, :func:`mlp` for ``"xent"`` (torch's current seed)."""
    return torch.nn.Linear(6, 4) if kind == "mse" else mlp()


def make_batches(kind: str, steps: int, seed: int = 0) -> list[Batch]:
    """``steps`` batches of 8: ``x`` (8, 6) and ``y``, (8, 4) targets or 4-class labels."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g)
        y = (torch.randn(8, 4, generator=g) if kind == "mse"
             else torch.randint(0, 4, (8,), generator=g))
        out.append({"x": x, "y": y})
    return out


def loss_for(kind: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, y) if kind == "mse" else F.cross_entropy(out, y)


def make_train_step(model: torch.nn.Module, opt: torch.optim.Optimizer,
                    kind: str) -> Callable[[Batch], Batch]:
    """The function a training step compiles: returns ``{"loss": ...}``."""
    def train_step(d: Batch) -> Batch:
        opt.zero_grad()
        loss = loss_for(kind, model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}
    return train_step


def sgd_with_momentum(model: torch.nn.Module, context: Any = None,
                      lr: float = 0.1) -> torch.optim.SGD:
    """SGD with momentum 0.9 over ``model``, its momentum buffers created now and, given a
    ``context`` (an :class:`mlsdk.Context`), named ``opt.momentum.<param>`` and registered."""
    from mlsdk import set_tensor_name

    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for name, p in model.named_parameters():
        buf = opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        if context is not None:
            set_tensor_name(buf, f"opt.momentum.{name}")
            context.register_buffer(buf)
    return opt
