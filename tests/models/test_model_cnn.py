"""A ResNet-style CNN on the device against torch eager on the same weights and inputs:
inference (eval mode), and 20 compiled SGD-momentum training steps with BatchNorm in train
mode, gradient accumulation over 2 micro-batches and ``clip_grad_norm_``.

Tolerance: ``rtol=1e-5, atol=1e-6`` (float32) on outputs and on the loss at every step, as
``tests/sdk/test_training.py``. The device runs torch's own kernels for convolution and pooling
(the IR references), but batch norm keeps a few per-channel scalars in float32 where torch
uses double, and sums may associate differently; those differ by an ulp or so per step.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.cnn import CNN
from mlsdk.testing.examples import run_example
from mlsdk.testing.training import sgd_with_momentum

RTOL, ATOL = 1e-5, 1e-6
STEPS = 20
SEED = 23


def _batches(steps: int, size: int = 8) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(SEED)
    return [{"x": torch.randn(size, 1, 8, 8, generator=g),
             "y": torch.randint(0, 10, (size,), generator=g)} for _ in range(steps)]


def test_cnn_inference_matches_torch(tmp_path):
    torch.manual_seed(SEED)
    model = CNN().eval()
    # Non-trivial running statistics, so eval-mode batch norm is not the identity.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    batch = _batches(1)[0]
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        infer = context.compile(lambda d: {"logits": model(d["x"])}, {"x": batch["x"]},
                                storage.path(tmp_path / "infer"))
        for b in _batches(3):
            got = infer({"x": b["x"]})["logits"].cpu()
            torch.testing.assert_close(got, model(b["x"]), rtol=RTOL, atol=ATOL,
                                       msg=lambda m: f"seed={SEED}: {m}")


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, micro: int, clip: bool):
    """Zero the gradients, accumulate them over ``micro`` micro-batches, clip, step."""

    def step(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        opt.zero_grad()
        total = torch.zeros(())
        for i in range(micro):
            loss = F.cross_entropy(model(d[f"x{i}"]), d[f"y{i}"]) / micro
            loss.backward()
            total = total + loss.detach()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return {"loss": total}

    return step


def _micro_batches(batch: dict[str, torch.Tensor], micro: int) -> dict[str, torch.Tensor]:
    # Micro-batches as separate inputs ("x0", "x1", ...), so that the step needs no slice op.
    size = len(batch["x"]) // micro
    return {f"{k}{i}": v[i * size:(i + 1) * size].clone()
            for i in range(micro) for k, v in batch.items()}


TRAINING = [
    pytest.param(1, False, id="one-batch"),
    pytest.param(2, True, id="accumulate2-clip"),
]


@pytest.mark.parametrize(("micro", "clip"), TRAINING)
def test_cnn_training_matches_torch_step_by_step(tmp_path, micro, clip):
    torch.manual_seed(SEED)
    model = CNN().train()
    reference = copy.deepcopy(model)
    ref_opt = sgd_with_momentum(reference, lr=0.05)
    ref_step = _train_step(reference, ref_opt, micro, clip)
    batches = [_micro_batches(b, micro) for b in _batches(STEPS)]
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        opt = sgd_with_momentum(model, context, lr=0.05)
        step = context.compile(_train_step(model, opt, micro, clip), batches[0],
                               storage.path(tmp_path / "step"))
        for index, batch in enumerate(batches):
            loss = step(batch)["loss"].item()
            ref_loss = ref_step(batch)["loss"].item()
            assert loss == pytest.approx(ref_loss, rel=RTOL, abs=ATOL), f"step {index}"
        context.synchronize()
    for (name, p), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL,
                                   msg=lambda m, name=name: f"{name}: {m}")
    for (name, buf), ref in zip(model.named_buffers(), reference.buffers(), strict=True):
        torch.testing.assert_close(buf, ref, rtol=RTOL, atol=ATOL,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_train_cnn_example_reaches_the_threshold(tmp_path):
    run = run_example("train_cnn.py", "--device", "mncore2:auto", "--outdir", str(tmp_path),
                      cwd=tmp_path, timeout=300)
    assert "test accuracy" in run.stdout
