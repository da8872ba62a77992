"""What the model-zoo tests share: a compiled training step and its eager twin, run side by
side on copies of one model, with the losses and parameters of every step compared."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from mlsdk import Context, MNCoreAdam, MNCoreAdamW, set_buffer_name_in_optimizer, storage

Batch = dict[str, torch.Tensor]
LossFn = Callable[[torch.nn.Module, Batch], torch.Tensor]

#: MN-Core optimizer -> the torch.optim class of the same update.
TORCH_TWIN: dict[type, type] = {MNCoreAdam: torch.optim.Adam, MNCoreAdamW: torch.optim.AdamW}


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def train_side_by_side(context: Context, model: torch.nn.Module, loss_fn: LossFn,
                       batches: Sequence[Batch], path: Any, optimizer: type = MNCoreAdamW,
                       **settings: Any) -> tuple[list[tuple[float, float]], torch.nn.Module]:
    """Train ``model`` compiled on ``context`` and a deep copy eagerly, one step per batch
    (compiled on ``batches[0]``); return ``(compiled loss, eager loss)`` per step and the
    eagerly trained copy, ``model`` synchronized from the device."""
    reference = copy.deepcopy(model)
    context.registry.register("model", model)
    opt = optimizer(trainable(model), foreach=False, **settings)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    ref_opt = TORCH_TWIN[optimizer](trainable(reference), foreach=False, **settings)

    def step(d: Batch) -> dict[str, torch.Tensor]:
        opt.zero_grad()
        loss = loss_fn(model, d)
        loss.backward()
        opt.step()
        return {"loss": loss}

    compiled = context.compile(step, batches[0], storage.path(path), training=True)
    losses = []
    for batch in batches:
        got = float(compiled(batch)["loss"].cpu())
        ref_opt.zero_grad()
        want = loss_fn(reference, batch)
        want.backward()
        ref_opt.step()
        losses.append((got, float(want)))
    context.synchronize()
    return losses, reference


def assert_parameters_close(model: torch.nn.Module, reference: torch.nn.Module, *, rtol: float,
                            atol: float) -> None:
    mine = dict(model.named_parameters())
    for name, value in reference.named_parameters():
        torch.testing.assert_close(mine[name].detach(), value.detach(), rtol=rtol, atol=atol,
                                   msg=lambda m, n=name: f"{n}: {m}")
