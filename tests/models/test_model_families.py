"""Recurrent, segmentation and grouped-query attention models on ``mncore2:auto`` against torch
eager on the same weights and batches: an LSTM and a GRU sequence classifier, a small U-Net
(``ConvTranspose2d`` up-sampling, ``cross_entropy`` over ``[N, C, H, W]`` logits) and an
attention block with 4 query heads over 2 key/value heads (``enable_gqa=True``, causal and
not), each for inference and for compiled Adam training steps.

Tolerances (float32). Inference: ``rtol=1e-5, atol=1e-5``, as ``tests/models/test_hf_models.py``:
the device runs the aten ops torch traced with torch's kernels as references, but its matmuls
and sums may associate differently (an ulp or so per op), and an LSTM carries that through
every time step. Training, over ``STEPS`` Adam steps: the losses to ``rtol=1e-5, atol=1e-6``,
the parameters to ``rtol=1e-4, atol=1e-5``. Adam divides each gradient by ``sqrt(v)``: its
first updates are about ``lr * g / |g|``, so a gradient that differs by a few ulps (another sum
order in a backward convolution or a recurrence) moves its parameter by a relative error
around ``1e-6`` of ``lr`` per step, more where ``|g|`` nears Adam's ``eps``. Measured at
``1e-6 / 1e-7``: the first parameters off were within ``1.3e-6`` absolute and ``1e-5``
relative (GQA ``kv.weight``, U-Net ``down2``, LSTM ``weight_ih_l1``); the bounds leave about
ten times that. A gradient that is only rounding noise (a key bias, which softmax ignores)
would be scaled to a full step of random sign: the attention block has none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from mlsdk import Context, MNCoreAdam, MNDevice, set_buffer_name_in_optimizer, storage
from torch import nn

RTOL = ATOL = 1e-5
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-6
PARAM_RTOL, PARAM_ATOL = 1e-4, 1e-5
STEPS = 3
LR = 1e-2

Batch = dict[str, torch.Tensor]


class SequenceClassifier(nn.Module):
    """A 2-layer recurrent encoder (LSTM, or bidirectional GRU) and a linear head on its last
    time step."""

    def __init__(self, cell: str, features: int = 4, hidden: int = 8, classes: int = 3):
        super().__init__()
        if cell == "lstm":
            self.rnn: nn.RNNBase = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        else:
            self.rnn = nn.GRU(features, hidden, num_layers=2, batch_first=True,
                              bidirectional=True)
        self.head = nn.Linear(hidden * (2 if self.rnn.bidirectional else 1), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


class UNet(nn.Module):
    """Two down-sampling stages, a bottleneck and two ``ConvTranspose2d`` up-sampling stages
    with skip connections, per-pixel class logits."""

    def __init__(self, channels: int = 3, classes: int = 4, width: int = 4):
        super().__init__()

        def block(cin: int, cout: int) -> nn.Module:
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())

        self.down1, self.down2 = block(channels, width), block(width, 2 * width)
        self.bottom = block(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = block(4 * width, 2 * width)
        # Odd kernel with padding and output_padding: the other way to double a size.
        self.up1 = nn.ConvTranspose2d(2 * width, width, 3, stride=2, padding=1, output_padding=1)
        self.dec1 = block(2 * width, width)
        self.out = nn.Conv2d(width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], 1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], 1))
        return self.out(u1)


class GQABlock(nn.Module):
    """A pre-norm attention block with 4 query heads over 2 key/value heads, and an MLP."""

    def __init__(self, width: int = 32, heads: int = 4, kv_heads: int = 2, causal: bool = True,
                 classes: int = 5):
        super().__init__()
        self.heads, self.kv_heads, self.causal = heads, kv_heads, causal
        self.head_dim = width // heads
        self.norm = nn.LayerNorm(width)
        self.q = nn.Linear(width, width)
        # No bias on keys: softmax ignores a key bias (it adds q . b to every score of a row),
        # so its gradient is rounding noise around 0, which Adam's g / sqrt(v) scales up to
        # a full step of either sign. Eager and the device would each take a random one.
        self.kv = nn.Linear(width, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        h = self.norm(x)
        q = self.q(h).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(batch, length, 2 * self.kv_heads, self.head_dim).transpose(
            1, 2).chunk(2, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(batch, length, -1))
        x = x + self.mlp(x)
        return self.head(x)


def _batches(name: str, seed: int, count: int) -> list[Batch]:
    g = torch.Generator().manual_seed(seed)
    if name in ("lstm", "gru"):
        return [{"x": torch.randn(3, 6, 4, generator=g),
                 "y": torch.randint(0, 3, (3,), generator=g)} for _ in range(count)]
    if name == "unet":
        return [{"x": torch.randn(2, 3, 8, 8, generator=g),
                 "y": torch.randint(0, 4, (2, 8, 8), generator=g)} for _ in range(count)]
    return [{"x": torch.randn(2, 6, 32, generator=g),
             "y": torch.randint(0, 5, (2, 6), generator=g)} for _ in range(count)]


def _model(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if name in ("lstm", "gru"):
        return SequenceClassifier(name)
    if name == "unet":
        return UNet()
    return GQABlock(causal=name == "gqa-causal")


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # [N, C] logits, [N, C, H, W] per-pixel logits (nll_loss2d), or [N, T, C] per token.
    if out.dim() == 3:
        return F.cross_entropy(out.transpose(1, 2), y)
    return F.cross_entropy(out, y)


MODELS = ["lstm", "gru", "unet", "gqa-causal", "gqa"]


@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_eager(tmp_path, seed, name):
    model = _model(name, seed).eval()
    batches = _batches(name, seed, 3)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        infer = context.compile(lambda d: {"out": model(d["x"])}, {"x": batches[0]["x"]},
                                storage.path(tmp_path / "infer"))
        for index, batch in enumerate(batches):
            got = infer({"x": batch["x"]})["out"].cpu()
            with torch.no_grad():
                want = model(batch["x"])
            torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, i=index: f"seed={seed} batch {i}: {m}")


def _step(model: nn.Module, opt: torch.optim.Optimizer) -> Callable[[Batch], Batch]:
    def step(d: Batch) -> Batch:
        opt.zero_grad()
        loss = _loss(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss.detach()}

    return step


@pytest.mark.parametrize("name", MODELS)
def test_adam_training_steps_match_eager(tmp_path, seed, name):
    model = _model(name, seed).train()
    reference = copy.deepcopy(model)
    ref_step = _step(reference, torch.optim.Adam(reference.parameters(), lr=LR, foreach=False))
    batches = _batches(name, seed, STEPS)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        opt = MNCoreAdam(model.parameters(), lr=LR, foreach=False)
        set_buffer_name_in_optimizer(opt, "opt")
        context.register_optimizer_buffers(opt)
        step = context.compile(_step(model, opt), batches[0], storage.path(tmp_path / "step"))
        for index, batch in enumerate(batches):
            loss = step(batch)["loss"].item()
            want = ref_step(batch)["loss"].item()
            assert loss == pytest.approx(want, rel=LOSS_RTOL, abs=LOSS_ATOL), (
                f"seed={seed} step {index}")
        context.synchronize()
    initial = _model(name, seed).state_dict()
    moved = {k for k, p in model.named_parameters() if not torch.equal(p.detach(), initial[k])}
    # A GRU's reverse direction reads one step of the last layer's input only, from a zero
    # state: its hidden-to-hidden weights get no gradient, in eager as on the device.
    assert moved == {k for k, p in reference.named_parameters()
                     if not torch.equal(p.detach(), initial[k])}
    assert len(moved) > len(initial) // 2, f"only {sorted(moved)} moved"
    for (key, p), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=PARAM_RTOL, atol=PARAM_ATOL,
                                   msg=lambda m, k=key: f"seed={seed} {k}: {m}")
