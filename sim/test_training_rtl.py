"""A training step on the RTL memory system: a tiny linear model trained 3 steps with SGD and
momentum on ``mncore2:rtl`` and ``mncore2:icarus`` gives the same losses and trained parameters
as on the functional model, its parameters and momentum buffers updated in place in DRAM (read
and written through the RTL controllers' compute port) and read back only by synchronize().
The same for ``MNCoreAdam`` (2 steps of a smaller model): its step counter, moments and lr
tensor live in DRAM too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mlsdk import (
    Context,
    MNCoreAdam,
    MNDevice,
    set_buffer_name_in_optimizer,
    set_tensor_name,
    storage,
)
from mlsdk.testing.flows import require_device

STEPS = 3


def _train(device: str, tmp: Path) -> tuple[list[float], list[torch.Tensor], int]:
    torch.manual_seed(3)
    model = torch.nn.Linear(4, 2)
    context = Context(MNDevice(device))
    context.registry.register("model", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for name, p in model.named_parameters():
        buf = opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        set_tensor_name(buf, f"opt.momentum.{name}")
        context.register_buffer(buf)

    def train_step(d):
        opt.zero_grad()
        loss = F.mse_loss(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}

    g = torch.Generator().manual_seed(5)
    batches = [{"x": torch.randn(4, 4, generator=g), "y": torch.randn(4, 2, generator=g)}
               for _ in range(STEPS)]
    step = context.compile(train_step, batches[0], storage.path(tmp / "step"))
    losses = [step(b)["loss"].item() for b in batches]
    calls = [r for r in context.report().records if r.kind == "call"]
    state_bytes = sum(r.state_bytes for r in calls[1:])
    context.synchronize()
    params = [p.detach().clone() for p in model.parameters()]
    context.close()
    return losses, params, state_bytes


@pytest.mark.parametrize("device", ["mncore2:rtl", "mncore2:icarus"])
def test_training_on_rtl_matches_model(device: str, tmp_path: Path) -> None:
    require_device(device)
    losses, params, state_bytes = _train(device, tmp_path / "rtl")
    want_losses, want_params, _ = _train("mncore2:auto", tmp_path / "model")
    assert losses == want_losses  # the same ops on the same DRAM words: bit for bit
    for got, want in zip(params, want_params, strict=True):
        assert torch.equal(got, want)
    assert state_bytes == 0  # later steps never re-upload the state


def _train_adam(device: str, tmp: Path) -> tuple[list[float], list[torch.Tensor], int]:
    torch.manual_seed(4)
    model = torch.nn.Linear(3, 2)
    context = Context(MNDevice(device))
    context.registry.register("model", model)
    opt = MNCoreAdam(model.parameters(), lr=0.05, weight_decay=0.01)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)

    def train_step(d):
        opt.zero_grad()
        loss = F.mse_loss(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}

    g = torch.Generator().manual_seed(6)
    batches = [{"x": torch.randn(2, 3, generator=g), "y": torch.randn(2, 2, generator=g)}
               for _ in range(2)]
    step = context.compile(train_step, batches[0], storage.path(tmp / "adam"))
    losses = [step(b)["loss"].item() for b in batches]
    calls = [r for r in context.report().records if r.kind == "call"]
    state_bytes = sum(r.state_bytes for r in calls[1:])
    context.synchronize()
    trained = [p.detach().clone() for p in model.parameters()]
    trained += [t.detach().clone() for s in opt.state.values() for t in s.values()]
    context.close()
    return losses, trained, state_bytes


@pytest.mark.parametrize("device", ["mncore2:rtl", "mncore2:icarus"])
def test_adam_training_on_rtl_matches_model(device: str, tmp_path: Path) -> None:
    require_device(device)
    losses, trained, state_bytes = _train_adam(device, tmp_path / "rtl")
    want_losses, want_trained, _ = _train_adam("mncore2:auto", tmp_path / "model")
    assert losses == want_losses
    assert len(trained) == len(want_trained) == 2 + 2 * 3  # params; step, exp_avg, exp_avg_sq
    for got, want in zip(trained, want_trained, strict=True):
        assert torch.equal(got, want)
    assert state_bytes == 0
