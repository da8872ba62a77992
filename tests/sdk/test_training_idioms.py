"""Training idioms inside one compiled step, against torch eager step by step: gradient
accumulation over several ``backward()`` calls, ``ignore_index`` labels, weight-decay groups.

Tolerance: as ``tests/sdk/test_training.py`` (same aten ops in torch's order, matmuls and
reductions possibly associated differently): losses and parameters within ``rtol=1e-5,
atol=1e-6`` (float32) at every step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from mlsdk import Context, MNCoreAdamW, MNDevice, set_buffer_name_in_optimizer, storage
from mlsdk.testing.training import mlp

RTOL, ATOL = 1e-5, 1e-6
STEPS = 10
Batch = dict[str, torch.Tensor]


def _batches(steps: int, seed: int = 0, ignored: bool = False) -> list[Batch]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        y = torch.randint(0, 4, (8,), generator=g)
        if ignored:  # some labels are the ignore_index, never all of them
            y[torch.randperm(8, generator=g)[:3]] = -100
        out.append({"a": torch.randn(8, 6, generator=g), "b": torch.randn(8, 6, generator=g),
                    "y": y})
    return out


def _accumulating(model: torch.nn.Module, opt: torch.optim.Optimizer
                  ) -> Callable[[Batch], Batch]:
    """Two micro-batches, two backward() calls, one optimizer step."""
    def step(d: Batch) -> Batch:
        opt.zero_grad()
        first = F.cross_entropy(model(d["a"]), d["y"]) / 2
        first.backward()
        second = F.cross_entropy(model(d["b"]), d["y"]) / 2
        second.backward()
        opt.step()
        return {"loss": first.detach() + second.detach()}
    return step


def _ignoring(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable[[Batch], Batch]:
    def step(d: Batch) -> Batch:
        opt.zero_grad()
        loss = F.cross_entropy(model(d["a"]), d["y"], ignore_index=-100)
        loss.backward()
        opt.step()
        return {"loss": loss}
    return step


def _sgd(context: Context, model: torch.nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum over a registered model, its buffers created and registered."""
    context.registry.register("model", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    for p in model.parameters():
        opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    return opt


def _groups(model: torch.nn.Module) -> list[dict]:
    """The usual AdamW split: weight decay on the matrices, none on biases."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    biases = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": matrices, "weight_decay": 0.1}, {"params": biases, "weight_decay": 0.0}]


def _run(context: Context, tmp_path, model, opt, reference, ref_opt, make_step, batches):
    step = context.compile(make_step(model, opt), batches[0], storage.path(tmp_path / "step"))
    ref_step = make_step(reference, ref_opt)
    for index, batch in enumerate(batches):
        got = step(batch)["loss"].item()
        want = ref_step(batch)["loss"].item()
        assert got == pytest.approx(want, rel=RTOL, abs=ATOL), f"step {index}"
    context.synchronize()
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_gradient_accumulation_over_two_backward_calls(device, tmp_path):
    torch.manual_seed(1)
    model = mlp()
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, foreach=False)
    with Context(MNDevice(device)) as context:
        opt = _sgd(context, model)
        _run(context, tmp_path, model, opt, reference, ref_opt, _accumulating,
             _batches(STEPS))


def test_accumulating_a_transposed_grad_writes_through_the_view(tmp_path):
    """A Linear weight's .grad is a t() view of the matmul that made it: the second
    backward() adds into that view, which must update the gradient itself."""
    torch.manual_seed(2)
    model = torch.nn.Linear(6, 4)
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, foreach=False)
    with Context(MNDevice("mncore2:auto")) as context:
        opt = _sgd(context, model)
        step = context.compile(_accumulating(model, opt), _batches(1)[0],
                               storage.path(tmp_path / "step"))
        assert "permute" in step.program.describe()
        batch = _batches(1)[0]
        step(batch)
        _accumulating(reference, ref_opt)(batch)
        context.synchronize()
        torch.testing.assert_close(model.weight.detach(), reference.weight.detach(),
                                   rtol=RTOL, atol=ATOL)


def test_ignore_index_labels(tmp_path):
    torch.manual_seed(3)
    model = mlp()
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, foreach=False)
    with Context(MNDevice("mncore2:auto")) as context:
        opt = _sgd(context, model)
        _run(context, tmp_path, model, opt, reference, ref_opt, _ignoring,
             _batches(STEPS, ignored=True))


def test_weight_decay_param_groups(tmp_path):
    torch.manual_seed(4)
    model = mlp()
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.AdamW(_groups(reference), lr=1e-2, foreach=False)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        opt = MNCoreAdamW(_groups(model), lr=1e-2, foreach=False)
        set_buffer_name_in_optimizer(opt, "opt")
        context.register_optimizer_buffers(opt)
        _run(context, tmp_path, model, opt, reference, ref_opt, _accumulating, _batches(STEPS))
