"""``run_timm``-style flows on timm's model families, rebuilt from ``torch.nn`` layers
(``mlsdk.testing.timm``: MobileNetV3, EfficientNet, ConvNeXt, DeiT), on
``mncore2:auto`` against torch eager.

- Inference as ``run_timm.py`` runs it: the model registered, ``infer`` under ``no_grad``,
  a batch of images, contiguous and ``channels_last`` (model and images, as
  ``model.to(memory_format=torch.channels_last)``); DropPath is built with a rate and is the
  identity at eval. The device's logits equal torch's and so do the top-5 classes.
- Training as ``run_timm.py``'s loop: the same batch every step, the loss must fall (its
  validation), and here every step's loss also matches eager, on four paths:
  ``registry-sgd`` (the module registered, ``torch.optim.SGD`` with momentum buffers
  registered, as the repo's ResNet-style CNN test), ``params-mncoresgd`` (``run_timm.py``'s
  fx2onnx path without its ``export_kwargs``: ``set_tensor_name_in_module``,
  ``register_param`` per parameter, ``MNCoreSGD(params, 0.1, 0.9, 0.0)``,
  ``set_buffer_name_in_optimizer``, ``register_optimizer_buffers``), ``backprop``
  (``run_timm.py``'s other path: ``registry.register("optimizer0", torch_sgd)``,
  ``optimizers=[...]``, ``options={"backprop": True}``, learning rate, global step and grad
  scale fed each step) and ``adamw`` (``MNCoreAdamW`` against ``torch.optim.AdamW``).
  BatchNorm's running statistics are never registered by the test, as in ``run_timm.py``: they
  are the step's device state and equal torch's after ``synchronize()`` (docs/registry.md).

Tolerance: float32 throughout. Convolution, pooling and the activations are torch's own kernels
(bit-equal); matmuls, the attention and the layer/batch-norm reductions may associate
differently, an ulp or so per op. Inference logits: ``rtol=1e-5, atol=1e-5``. Losses: every step
within ``rel=1e-5, abs=1e-6`` (measured by ``bench/bench_timm.py``, 8 steps: at most 3.1e-6
relative, ConvNeXt's, whose loss nears 0). Parameters after the loop: ``rtol=1e-4,
atol=1e-5`` (measured: at most 3.6e-7 apart after 8 SGD steps and 1.4e-5 after 8 AdamW steps,
within the relative part; AdamW divides by the root of the second moment, which magnifies an
ulp of a small gradient).
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from mlsdk import (
    Context,
    MNDevice,
    storage,
)
from mlsdk.testing.timm import (
    FAMILIES,
    NUM_CLASSES,
    PATHS,
    compiled_step,
    optimizers,
    train_step,
)
from mncore_compiler.errors import CaptureError, UnsupportedOperationError
from mncore_hdl.paths import repo_root

RTOL, ATOL = 1e-5, 1e-5
LOSS_REL, LOSS_ABS = 1e-5, 1e-6
PARAM_RTOL, PARAM_ATOL = 1e-4, 1e-5
STEPS = 8
SEED = 35


def _images(batch: int, size: int, seed: int = SEED) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _randomize_running_stats(model: torch.nn.Module) -> None:
    # Non-trivial statistics, so that eval-mode batch norm is not the identity.
    g = torch.Generator().manual_seed(SEED + 1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_inference_matches_torch_with_the_same_top5(tmp_path, family, channels_last):
    torch.manual_seed(SEED)
    model = FAMILIES[family](drop=0.1).eval()
    _randomize_running_stats(model)
    images = _images(2, 32)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)

    def infer(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {"out": model(d["images"])}

    sample = {"images": images}
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        compiled = context.compile(infer, sample, storage.path(tmp_path) / "infer")
        result = compiled(sample)["out"].cpu()
        context.synchronize()
    expected = infer(sample)["out"]
    assert result.shape == (2, NUM_CLASSES)
    torch.testing.assert_close(result, expected, rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{family} seed={SEED}: {m}")
    for row in range(2):
        assert torch.equal(torch.topk(result[row], 5).indices,
                           torch.topk(expected[row], 5).indices), f"{family} image {row}"


TRAINING = [(f, p) for p in PATHS[:2] for f in sorted(FAMILIES)] + [
    ("mobilenetv3", "backprop"), ("deit", "backprop"), ("convnext", "adamw"), ("deit", "adamw")]


@pytest.mark.parametrize(("family", "path"), TRAINING, ids=[f"{f}-{p}" for f, p in TRAINING])
def test_training_loss_falls_and_matches_eager(tmp_path, family, path):
    torch.manual_seed(SEED)
    size = {"image": 16} if family == "deit" else {}  # ViT's position embedding fixes it
    model = FAMILIES[family](drop=0.0, **size).train()  # timm's default drop_path_rate is 0
    reference = copy.deepcopy(model)
    g = torch.Generator().manual_seed(SEED + 2)
    sample = {"images": _images(2, 16),
              "labels": torch.randint(0, NUM_CLASSES, (2,), generator=g)}
    with Context(MNDevice("mncore2:auto")) as context:
        opt, ref_opt = optimizers(path, context, model, reference)
        step = compiled_step(path, context, model, opt, sample, storage.path(tmp_path) / "step")
        ref_step = train_step(reference, ref_opt)
        losses = []
        for index in range(STEPS):
            loss = step(sample, index)["loss"].cpu().item()
            ref_loss = ref_step(sample)["loss"].item()
            assert loss == pytest.approx(ref_loss, rel=LOSS_REL, abs=LOSS_ABS), (
                f"{family} {path} step {index}")
            losses.append(loss)
        context.synchronize()
    assert losses[-1] < losses[0], f"{family} {path}: the loss did not fall: {losses}"
    for (name, p), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        got, want = p.detach(), ref.detach()
        if name.endswith("attn.qkv.bias") and path == "adamw":
            # The key bias adds one constant to a query's every score, which softmax ignores:
            # its gradient is rounding noise on both sides, and AdamW scales noise up to lr.
            width = got.shape[0] // 3
            keep = torch.ones(3 * width, dtype=torch.bool)
            keep[width:2 * width] = False
            got, want = got[keep], want[keep]
        torch.testing.assert_close(got, want, rtol=PARAM_RTOL, atol=PARAM_ATOL,
                                   msg=lambda m, name=name: f"{family} {path} {name}: {m}")
    # BatchNorm's running statistics, never registered by the test, are the function's
    # device state and follow torch's after synchronize() (issue 35, item 4).
    for (name, buf), ref in zip(model.named_buffers(), reference.buffers(), strict=True):
        torch.testing.assert_close(buf, ref, rtol=PARAM_RTOL, atol=PARAM_ATOL,
                                   msg=lambda m, name=name: f"{family} {path} {name}: {m}")


def test_drop_path_in_training_is_a_clear_error(tmp_path):
    # timm's drop_path draws a Bernoulli mask per sample in train mode: a random op.
    model = FAMILIES["deit"](image=16, drop=0.2, depth=1).train()
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        with pytest.raises((CaptureError, UnsupportedOperationError), match=r"bernoulli"):
            context.compile(lambda d: {"out": model(d["images"])}, {"images": _images(1, 16)},
                            storage.path(tmp_path) / "f")


def test_the_bench_prints_its_table(tmp_path):
    # The figures the docstring states come from bench/bench_timm.py; its quickest setting.
    bench = repo_root() / "bench" / "bench_timm.py"
    run = subprocess.run([sys.executable, str(bench), "--families", "deit", "--paths", "adamw",
                          "--steps", "2"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    row = run.stdout.splitlines()[-1].split()
    assert row[:2] == ["deit", "adamw"] and float(row[4]) <= LOSS_REL


ACTIVATIONS = {
    "hardswish_": torch.nn.Hardswish(inplace=True),
    "hardsigmoid_": torch.nn.Hardsigmoid(inplace=True),
    "hardtanh_": torch.nn.Hardtanh(-2.0, 1.5, inplace=True),
    "relu6_": torch.nn.ReLU6(inplace=True),
    "leaky_relu_": torch.nn.LeakyReLU(0.1, inplace=True),
    "elu_": torch.nn.ELU(0.8, inplace=True),
    "celu": torch.nn.CELU(0.5),
    "selu_": torch.nn.SELU(inplace=True),
    "mish_": torch.nn.Mish(inplace=True),
    "silu_": torch.nn.SiLU(inplace=True),
    "relu_": torch.nn.ReLU(inplace=True),
    "gelu-tanh": torch.nn.GELU(approximate="tanh"),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_trains_on_the_device(tmp_path, name):
    # A Linear and the activation (in place on the Linear's output, as timm's blocks do), one
    # SGD step through Context.compile: the loss and the updated weights as torch's.
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), ACTIVATIONS[name], torch.nn.Linear(8, 3))
    reference = copy.deepcopy(model)
    g = torch.Generator().manual_seed(SEED)
    batch = {"images": 3 * torch.randn(5, 6, generator=g),
             "labels": torch.randint(0, 3, (5,), generator=g)}
    with Context(MNDevice("mncore2:auto")) as context:
        opt, ref_opt = optimizers("registry-sgd", context, model, reference)
        step = context.compile(train_step(model, opt), batch, storage.path(tmp_path) / "step")
        for _ in range(2):
            loss = step(batch)["loss"].cpu().item()
            assert loss == pytest.approx(train_step(reference, ref_opt)(batch)["loss"].item(),
                                         rel=LOSS_REL, abs=LOSS_ABS), name
        context.synchronize()
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)
