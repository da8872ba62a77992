"""A training step on the RTL memory system: a tiny linear model (and an MLP with a
BatchNorm) trained a few steps on ``mncore2:rtl`` and ``mncore2:icarus`` gives the same losses,
trained parameters, optimizer state and running statistics as on the functional model, bit for
bit. Parameters and optimizer state (torch's SGD momentum buffers; ``MNCoreAdam``'s step
counter, moments and lr tensor) and the running statistics are updated in place in DRAM (read
and written through the RTL controllers' compute port) and read back only by synchronize()."""

from __future__ import annotations

from collections.abc import Callable
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

Setup = Callable[[Context, torch.nn.Module], torch.optim.Optimizer]


def _sgd(context: Context, model: torch.nn.Module) -> torch.optim.Optimizer:
    """torch's SGD with momentum, its buffers created, named and registered by hand."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for name, p in model.named_parameters():
        buf = opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        set_tensor_name(buf, f"opt.momentum.{name}")
        context.register_buffer(buf)
    return opt


def _adam(context: Context, model: torch.nn.Module) -> torch.optim.Optimizer:
    opt = MNCoreAdam(model.parameters(), lr=0.05, weight_decay=0.01)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    return opt


def _linear(fan_in: int, fan_out: int) -> torch.nn.Module:
    return torch.nn.Linear(fan_in, fan_out)


def _batch_norm_mlp(fan_in: int, fan_out: int) -> torch.nn.Module:
    """Linear, BatchNorm1d with a cumulative average (momentum=None), Linear: running
    statistics and num_batches_tracked updated on the device at every step."""
    return torch.nn.Sequential(torch.nn.Linear(fan_in, 3), torch.nn.BatchNorm1d(3, momentum=None),
                               torch.nn.Linear(3, fan_out))


#: name -> (model, optimizer set-up, in/out features, batch, steps, seed, the state tensors
#: the optimizer keeps)
CASES = {
    "sgd": (_linear, _sgd, (4, 2), 4, 3, 3, 2),         # a momentum buffer per parameter
    "adam": (_linear, _adam, (3, 2), 2, 2, 4, 2 * 3),   # step, exp_avg, exp_avg_sq per parameter
    "batchnorm": (_batch_norm_mlp, _sgd, (4, 2), 4, 2, 5, 6),
}


def _train(device: str, tmp: Path, case: str) -> tuple[list[float], list[torch.Tensor], int]:
    make, setup, (fan_in, fan_out), batch, steps, seed, _ = CASES[case]
    torch.manual_seed(seed)
    model = make(fan_in, fan_out)
    context = Context(MNDevice(device))
    context.registry.register("model", model)
    opt = setup(context, model)

    def train_step(d):
        opt.zero_grad()
        loss = F.mse_loss(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}

    g = torch.Generator().manual_seed(seed + 2)
    batches = [{"x": torch.randn(batch, fan_in, generator=g),
                "y": torch.randn(batch, fan_out, generator=g)} for _ in range(steps)]
    step = context.compile(train_step, batches[0], storage.path(tmp / case))
    losses = [step(b)["loss"].item() for b in batches]
    calls = [r for r in context.report().records if r.kind == "call"]
    state_bytes = sum(r.state_bytes for r in calls[1:])
    context.synchronize()
    trained = [p.detach().clone() for p in model.parameters()]
    trained += [t.detach().clone() for s in opt.state.values() for t in s.values()]
    trained += [b.detach().clone() for b in model.buffers()]  # running statistics, if any
    context.close()
    return losses, trained, state_bytes


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("device", ["mncore2:rtl", "mncore2:icarus"])
def test_training_on_rtl_matches_model(device: str, case: str, tmp_path: Path) -> None:
    require_device(device)
    losses, trained, state_bytes = _train(device, tmp_path / "rtl", case)
    want_losses, want_trained, _ = _train("mncore2:auto", tmp_path / "model", case)
    assert losses == want_losses  # the same ops on the same DRAM words: bit for bit
    make, _, features, *_, optimizer_state = CASES[case]
    model = make(*features)
    expected = len(list(model.parameters())) + optimizer_state + len(list(model.buffers()))
    assert len(trained) == len(want_trained) == expected
    for got, want in zip(trained, want_trained, strict=True):
        assert torch.equal(got, want)
    assert state_bytes == 0  # later steps never re-upload the state
