"""Greedy generation with a compiled prefill and a compiled decode step over a fixed-size KV
cache (mlsdk.experimental.llm.generation), on a tiny random Llama.

Both caches (the shifted window of MLSDK's ``llm_infer``, and Hugging Face's ``StaticCache``
written with ``index_copy_`` at the cache position) give ``model.generate``'s 16 greedy ids; each
decode step after the first moves no cache bytes: the cache is relocated from the step before
(one compile of decode, its cache output loop-carried into its input), and the call's host and
converter bytes are 0 (token, positions and mask are loaded into input proxies beforehand).
"""

from __future__ import annotations

import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")
from mlsdk.experimental.llm import tiny  # noqa: E402
from mlsdk.experimental.llm.generation import (  # noqa: E402
    CACHES,
    CompiledGenerator,
    eager_generate,
)

NEW_TOKENS, PROMPT, CACHE = 16, 8, 32


def _prompts(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 256, (2, PROMPT), generator=g)
    mask = torch.ones_like(ids)
    ids[0, :3], mask[0, :3] = 0, 0  # the shorter prompt is left-padded
    return ids, mask


@pytest.mark.parametrize("cache", CACHES)
def test_greedy_ids_equal_generate_and_steps_move_no_cache(context, tmp_path, seed, cache):
    model = tiny.tiny_llama(seed=seed)
    context.registry.register("model", model)
    ids, mask = _prompts(seed)
    with torch.no_grad():
        want = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS,
                              do_sample=False, pad_token_id=0, eos_token_id=None)[:, PROMPT:]
    generator = CompiledGenerator(context, model, batch=2, prompt_length=PROMPT,
                                  cache_length=CACHE, codegen_dir=tmp_path, cache=cache)
    got = generator.generate(ids, mask, NEW_TOKENS)
    assert torch.equal(got, want), f"seed={seed}\ncompiled {got.tolist()}\ngenerate {want.tolist()}"
    torch.testing.assert_close(eager_generate(model, ids, mask, NEW_TOKENS, CACHE, cache), want)
    steps = context.report().calls("decode")
    assert len(steps) == NEW_TOKENS - 1
    inputs = len(generator.decode.input_specs)
    for step in steps:
        assert (step.bytes["host"], step.bytes["converter"], step.conversions) == (0, 0, 0)
        assert step.relocations == inputs  # the cache and every per-step proxy
    cache_buffer = generator.decode.bindings["past_key_values"]
    assert cache_buffer.nbytes == generator.decode.input_specs["past_key_values"].nbytes


def test_decode_is_compiled_once_with_its_cache_loop_carried(context, tmp_path, seed):
    model = tiny.tiny_llama(seed=seed)
    context.registry.register("model", model)
    generator = CompiledGenerator(context, model, batch=1, prompt_length=4, cache_length=8,
                                  codegen_dir=tmp_path)
    decode = generator.decode
    assert decode.output_specs["next_past_key_values"].is_memcopyable_to(
        decode.input_specs["past_key_values"])
    assert generator.prefill.output_specs["next_past_key_values"].is_memcopyable_to(
        decode.input_specs["past_key_values"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decode", "prefill"]


def test_generate_rejects_no_new_tokens_and_a_full_static_cache(context, tmp_path, seed):
    model = tiny.tiny_llama(seed=seed)
    context.registry.register("model", model)
    generator = CompiledGenerator(context, model, batch=1, prompt_length=4, cache_length=6,
                                  codegen_dir=tmp_path, cache="static")
    ids = torch.tensor([[5, 6, 7, 8]])
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int, not 0"):
        generator.generate(ids, torch.ones_like(ids), 0)
    with pytest.raises(ValueError, match="static cache of 6 slots is full"):
        generator.generate(ids, torch.ones_like(ids), 4)
    with pytest.raises(ValueError, match="cache must be one of shifted, static, not 'ring'"):
        eager_generate(model, ids, torch.ones_like(ids), 2, 6, "ring")
