"""Mixture-of-experts decoders (Mixtral, Qwen2-MoE) from tiny random configs, nothing
downloaded: inference and AdamW training steps against eager. Their routers pick experts with
``topk``; transformers' default expert path sorts the chosen experts (``sort``), counts each
one's tokens (``histc``, ``cumsum(dtype=int32)``) and runs one matmul per expert group
(``transformers.grouped_mm_fallback`` and its backward); ``batched_mm`` gathers each token's
expert weights instead.

Tolerance (float32): logits ``rtol=1e-5, atol=1e-5`` (as tests/sdk/test_hf_models.py); losses
over 3 steps ``rtol=1e-5, atol=1e-5``; parameters ``rtol=1e-4, atol=1e-5`` (AdamW's division
by ``sqrt(v) + eps`` magnifies an ulp of a small second moment). AdamW runs with
``eps=1e-6``: a gradient that is pure cancellation noise (Qwen2-MoE's ``lm_head`` row of a
token no label names: 5.2e-9 in float32 against 6.0e-9 in float64, its row's largest 8.5e-3)
would otherwise take a step of ``lr * g / (|g| + 1e-8)``, which eager float32 itself misses
by 3e-5; with ``eps=1e-6`` such noise moves a parameter by ``1e-8`` while every real gradient
takes the same step as before. The routing itself is exact: random weights give no tied router
scores, so each token reaches the experts torch picks.
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

VOCAB = 128
COMMON = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts_per_tok": 2,
          "max_position_embeddings": 64}


def _mixtral(seed: int, experts: str):
    config = transformers.MixtralConfig(intermediate_size=64, num_local_experts=4,
                                        experts_implementation=experts, **COMMON)
    torch.manual_seed(seed)
    return transformers.MixtralForCausalLM(config)


def _qwen2_moe(seed: int, experts: str):
    config = transformers.Qwen2MoeConfig(intermediate_size=64, moe_intermediate_size=32,
                                         shared_expert_intermediate_size=48, num_experts=4,
                                         experts_implementation=experts, **COMMON)
    torch.manual_seed(seed)
    return transformers.Qwen2MoeForCausalLM(config)


MODELS = {"mixtral": _mixtral, "qwen2_moe": _qwen2_moe}
EXPERTS = ["grouped_mm", "batched_mm"]


def _ids(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(3, VOCAB, (2, 6), generator=g)}


@pytest.mark.parametrize("experts", EXPERTS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_moe_inference_matches_eager(context, tmp_path, seed, name, experts):
    model = MODELS[name](seed, experts).eval()
    context.registry.register("model", model)
    forward = context.compile(lambda d: {"logits": model(d["input_ids"]).logits}, _ids(seed),
                              storage.path(tmp_path / name))
    other = _ids(seed + 1)
    got = forward(other)["logits"].cpu()
    with torch.no_grad():
        torch.testing.assert_close(got, model(other["input_ids"]).logits, rtol=1e-5, atol=1e-5)


def _loss(model, d):
    return model(d["input_ids"], labels=d["input_ids"]).loss


@pytest.mark.parametrize("name", sorted(MODELS))
def test_moe_training_steps_match_eager(context, tmp_path, seed, name):
    model = MODELS[name](seed, "grouped_mm").train()
    batches = [_ids(seed + i) for i in range(3)]
    losses, reference = train_side_by_side(context, model, _loss, batches, tmp_path / name,
                                           lr=1e-3, eps=1e-6)
    for step, (got, want) in enumerate(losses):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"step {step}")
    assert_parameters_close(model, reference, rtol=1e-4, atol=1e-5)
