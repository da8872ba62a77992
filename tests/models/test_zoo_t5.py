"""T5 (``T5ForConditionalGeneration`` from a tiny random config, nothing downloaded): forward
with labels (its ``_shift_right`` copies into a slice of a new tensor) for inference, and
training steps with AdamW (traced in torch.export's state, so that transformers' mask code
never reads a tensor's value) against eager.

Tolerance (float32): logits ``rtol=1e-5, atol=1e-5`` (as tests/models/test_hf_models.py); losses
over 3 AdamW steps ``rtol=1e-5, atol=1e-5``; parameters ``rtol=1e-4, atol=1e-5``: the device
associates matmuls and reductions in its own order (an ulp or so per op, through 2 + 2 layers
and the relative-position bias), and AdamW's division by ``sqrt(v) + eps`` magnifies an ulp of
a small second moment.
"""

from __future__ import annotations

import os

import pytest
import torch
from mlsdk import storage

os.environ["HF_HUB_OFFLINE"] = "1"  # tiny configs only: a download would be a bug
transformers = pytest.importorskip("transformers",
                                   reason="transformers is a test dependency of the kit")
from zoo_steps import assert_parameters_close, train_side_by_side  # noqa: E402

VOCAB = 64


def _t5(seed: int):
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                   num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                   decoder_start_token_id=0, pad_token_id=0,
                                   relative_attention_num_buckets=8)
    torch.manual_seed(seed)
    return transformers.T5ForConditionalGeneration(config)


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(1, VOCAB, (2, 5), generator=g)
    labels[1, -2:] = -100  # ignored positions, as a padded batch of targets has
    return {"input_ids": torch.randint(1, VOCAB, (2, 7), generator=g), "labels": labels}


def _loss(model, d):
    return model(input_ids=d["input_ids"], labels=d["labels"]).loss


def test_t5_forward_with_labels_matches_eager(context, tmp_path, seed):
    model = _t5(seed).eval()
    context.registry.register("model", model)
    batch = _batch(seed)

    def forward(d):
        out = model(input_ids=d["input_ids"], labels=d["labels"])
        return {"logits": out.logits, "loss": out.loss}

    compiled = context.compile(forward, batch, storage.path(tmp_path / "t5"))
    other = _batch(seed + 1)
    got = compiled(other)
    with torch.no_grad():
        want = forward(other)
    for name in ("logits", "loss"):
        torch.testing.assert_close(got[name].cpu(), want[name], rtol=1e-5, atol=1e-5)


def test_t5_adamw_training_steps_match_eager(context, tmp_path, seed):
    model = _t5(seed).train()  # dropout_rate=0: train() mode draws no random numbers
    batches = [_batch(seed + i) for i in range(3)]
    losses, reference = train_side_by_side(context, model, _loss, batches, tmp_path / "step",
                                           lr=1e-3, weight_decay=0.01)
    for step, (got, want) in enumerate(losses):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"step {step}")
    assert_parameters_close(model, reference, rtol=1e-4, atol=1e-5)
