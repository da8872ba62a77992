"""The GPT-style decoder (mlsdk.testing.gpt), both attention variants, compiled against torch.

Inference: logits on ``mncore2:auto`` against torch eager on the same weights. Training: 20
compiled AdamW steps, each over two micro-batches whose gradients accumulate, with
``clip_grad_norm_`` and label smoothing, against the same steps in torch eager; loss by loss,
then the synchronized parameters.

Tolerances (float32): the device computes the aten ops torch traced, decomposed in torch's own
order, but its matmuls and reductions associate differently (an ulp or so per op). Logits and
losses are compared with ``rtol=1e-5, atol=1e-5``; the parameters after 20 AdamW steps with
``rtol=1e-4, atol=1e-4`` (``lr=1e-2``: parameters move by up to 0.2), since Adam divides by
``sqrt(v)`` and so magnifies an ulp of difference in a small gradient into a parameter step of up
to ``lr`` times that ratio. The key third of each ``qkv`` bias is not compared: softmax is
invariant to it, so its true gradient is exactly 0 and what Adam normalises into steps of
``+-lr`` is rounding noise, different on any two implementations.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
from mlsdk import MNCoreAdamW, set_buffer_name_in_optimizer, storage
from mlsdk.testing.examples import run_example
from mlsdk.testing.gpt import GPT, make_gpt_step

RTOL, ATOL = 1e-5, 1e-5
PARAM_RTOL = PARAM_ATOL = 1e-4
STEPS = 20
VARIANTS = {"masked_softmax": False, "sdpa": True}


def _batches(steps: int, seed: int, vocab: int = 64, batch: int = 4, length: int = 12):
    # length < the model's block (16): the causal mask is sliced to the sequence.
    g = torch.Generator().manual_seed(seed)
    return [{"idx": torch.randint(0, vocab, (batch, length), generator=g),
             "y": torch.randint(0, vocab, (batch, length), generator=g)} for _ in range(steps)]


def _compile_step(context, step, batch, tmp_path):
    return context.compile(step, batch, storage.path(tmp_path / "step"))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_inference_matches_torch(context, tmp_path, seed, variant):
    model = GPT(sdpa=VARIANTS[variant]).eval()
    context.registry.register("model", model)
    batch = _batches(1, seed)[0]
    forward = context.compile(lambda d: {"logits": model(d["idx"])}, {"idx": batch["idx"]},
                              storage.path(tmp_path / "gpt"))
    for sample in _batches(3, seed + 1):
        got = forward({"idx": sample["idx"]})["logits"].cpu()
        with torch.no_grad():
            torch.testing.assert_close(got, model(sample["idx"]), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_training_matches_torch_step_by_step(context, tmp_path, seed, variant):
    model = GPT(sdpa=VARIANTS[variant])
    reference = copy.deepcopy(model)
    context.registry.register("model", model)
    opt = MNCoreAdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.1,
                                foreach=False)
    batches = _batches(STEPS, seed)
    step = _compile_step(context, make_gpt_step(model, opt), batches[0], tmp_path)
    ref_step = make_gpt_step(reference, ref_opt)
    for batch in batches:
        loss = step(batch)["loss"].item()
        assert loss == pytest.approx(ref_step(batch)["loss"].item(), rel=RTOL, abs=ATOL)
    context.synchronize()
    width = model.tok.weight.shape[1]
    for (name, p), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        got, want = p.detach(), ref.detach()
        if name.endswith("attn.qkv.bias"):
            keep = torch.ones(3 * width, dtype=torch.bool)
            keep[width:2 * width] = False
            got, want = got[keep], want[keep]
        torch.testing.assert_close(got, want, rtol=PARAM_RTOL, atol=PARAM_ATOL,
                                   msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_single_batch_step_with_clipping_matches_torch(context, tmp_path, seed, variant):
    # One backward() a step (no accumulation), clip_grad_norm_ always active.
    model = GPT(sdpa=VARIANTS[variant], layers=1)
    reference = copy.deepcopy(model)
    context.registry.register("model", model)
    opt = MNCoreAdamW(model.parameters(), lr=1e-2, foreach=False)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2, foreach=False)
    batches = _batches(5, seed)
    step = _compile_step(context, make_gpt_step(model, opt, micro_batches=1, max_norm=0.05),
                         batches[0], tmp_path)
    ref_step = make_gpt_step(reference, ref_opt, micro_batches=1, max_norm=0.05)
    for batch in batches:
        loss = step(batch)["loss"].item()
        assert loss == pytest.approx(ref_step(batch)["loss"].item(), rel=RTOL, abs=ATOL)


def test_train_gpt_example_learns(tmp_path):
    run = run_example("train_gpt.py", "--steps", "30", "--outdir", str(tmp_path), cwd=tmp_path,
                      timeout=300)
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", run.stdout)]
    assert "final loss" in run.stdout and losses[-1] < losses[0] / 2
