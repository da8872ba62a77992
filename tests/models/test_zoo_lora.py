"""A LoRA adapter (``peft``) on a tiny random Llama, nothing downloaded: AdamW training steps
of the adapter alone against eager (the causal-LM loss pads its labels with ``F.pad``:
``constant_pad_nd``), and the adapted model's inference.

Tolerance (float32): logits ``rtol=1e-5, atol=1e-5`` (as tests/models/test_hf_models.py); losses
over 3 steps ``rtol=1e-5, atol=1e-5``; the adapter's parameters ``rtol=1e-4, atol=1e-5``
(AdamW's division by ``sqrt(v) + eps`` magnifies an ulp of a small second moment; LoRA's B
starts at zero, so its first steps are all such divisions). The frozen base weights must not
change at all.
"""

from __future__ import annotations

import os

import pytest
import torch
from mlsdk import storage

os.environ["HF_HUB_OFFLINE"] = "1"  # tiny configs only: a download would be a bug
pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")
peft = pytest.importorskip("peft", reason="peft is a test dependency of the kit")
from mlsdk.experimental.llm import tiny  # noqa: E402
from zoo_steps import assert_parameters_close, train_side_by_side  # noqa: E402

VOCAB = 256


def _lora(seed: int):
    base = tiny.tiny_llama(seed=seed)
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                             target_modules=["q_proj", "v_proj", "down_proj"])
    model = peft.get_peft_model(base, config)
    torch.manual_seed(seed + 1)
    for name, p in model.named_parameters():  # B nonzero, so inference differs from the base
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    return model


def _ids(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(3, VOCAB, (2, 8), generator=g)}


def _loss(model, d):
    return model(input_ids=d["input_ids"], labels=d["input_ids"]).loss


def test_lora_training_steps_match_eager(context, tmp_path, seed):
    model = _lora(seed).train()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    batches = [_ids(seed + i) for i in range(3)]
    losses, reference = train_side_by_side(context, model, _loss, batches, tmp_path / "lora",
                                           lr=1e-2)
    for step, (got, want) in enumerate(losses):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"step {step}")
    assert_parameters_close(model, reference, rtol=1e-4, atol=1e-5)
    for name, p in model.named_parameters():
        if name in frozen:
            assert torch.equal(p.detach(), frozen[name]), name


def test_lora_inference_matches_eager(context, tmp_path, seed):
    model = _lora(seed).eval()
    context.registry.register("model", model)
    forward = context.compile(lambda d: {"logits": model(input_ids=d["input_ids"]).logits},
                              _ids(seed), storage.path(tmp_path / "infer"))
    other = _ids(seed + 1)
    got = forward(other)["logits"].cpu()
    with torch.no_grad():
        torch.testing.assert_close(got, model(input_ids=other["input_ids"]).logits,
                                   rtol=1e-5, atol=1e-5)
