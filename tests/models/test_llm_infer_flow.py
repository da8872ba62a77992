"""Greedy generation the way MLSDK's ``llm_infer.py`` runs it (a left-padded prompt of fixed
length, positions ``attention_mask.cumsum(1)``, a compiled prefill and a compiled decode step
whose stacked KV cache shifts by one each call), through each of its options, against
``model.generate`` on a local tiny Llama directory (``save_tiny_llama``): nothing downloaded.

The flow is written here from the example's description; the example's file is not copied.
"""

from __future__ import annotations

import os

import pytest
import torch
from mlsdk import CacheOptions, Context, MNDevice, storage
from mlsdk.experimental.llm.attention_mask import (
    prepare_4d_causal_attention_mask_with_cache_position as prepare_mask,
)
from mlsdk.experimental.llm.kv_cache import kv_cache_to_legacy, kv_cache_to_tensor
from mlsdk.experimental.llm.tiny import CHAT_TEMPLATE, save_tiny_llama

transformers = pytest.importorskip("transformers", reason="a test dependency of the kit")
os.environ["HF_HUB_OFFLINE"] = "1"
LENGTH, NEW = 12, 3
#: A prompt (7 tokens with <s>) whose greedy ids change from the first one when each token
#: also sees the next (the mask helper's old off-by-one): the generation tests see that bug.
PROMPT = "Greedy"


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_llama")
    small = {"hidden_size": 32, "intermediate_size": 64}
    return {"plain": save_tiny_llama(root / "plain", **small),
            "chat": save_tiny_llama(root / "chat", chat_template=CHAT_TEMPLATE, **small)}


def _load(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    return model, tokenizer


def _prompt(tokenizer, text):
    if not tokenizer.chat_template:
        return text
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _step_function(model):
    def forward(inputs):
        past = (kv_cache_to_legacy(inputs["past_key_values"]) if "past_key_values" in inputs
                else None)
        out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                    position_ids=inputs["position_ids"], past_key_values=past, use_cache=True)
        cache = out["cache"] if "cache" in out else out.past_key_values
        # The whole window shifts by one on the device, as in the example.
        return {"logits": out.logits, "next_past_key_values": kv_cache_to_tensor(cache)[
            :, :, :, :, 1:, :]}
    return forward


def generate_like_llm_infer(model, tokenizer, text, tmp_path, *, device="mncore2:auto",
                            compile_prefill=True, compile_decode=True, check=True,
                            mask_on_cpu=False, cache=True, length=LENGTH, new=NEW):
    """The generated ids ([1, new]) and the largest step difference against eager."""
    inputs = dict(tokenizer(_prompt(tokenizer, text), return_tensors="pt",
                            padding="max_length", max_length=length))
    # The window holds `length` tokens: beyond, the oldest leave it and generate() differs.
    assert int(inputs["attention_mask"].sum()) + new <= length, "the prompt does not fit"
    inputs["position_ids"] = inputs["attention_mask"].cumsum(1)
    if mask_on_cpu:
        inputs["attention_mask"] = prepare_mask(inputs["attention_mask"],
                                                inputs["position_ids"], model.dtype)
    context = Context(MNDevice(device))
    context.registry.register("model", model)
    forward = _step_function(model)
    compiled, generated, worst = {}, [], 0.0
    for step in range(new):
        phase = "prefill" if step == 0 else "decode"
        wanted = compile_prefill if step == 0 else compile_decode
        if wanted and phase not in compiled:
            options = CacheOptions(tmp_path / f"{phase}_cache") if cache else None
            compiled[phase] = context.compile(forward, inputs,
                                              storage.path(tmp_path / phase),
                                              cache_options=options)
        outputs = compiled.get(phase, forward)(inputs)
        if check:
            n = inputs["position_ids"].max()
            with torch.no_grad():
                expected = forward(inputs)
            for name in ("logits", "next_past_key_values"):
                got = outputs[name][:, -n:] if name == "logits" else \
                    outputs[name][:, :, :, :, -n:]
                want = expected[name][:, -n:] if name == "logits" else \
                    expected[name][:, :, :, :, -n:]
                worst = max(worst, (got - want).abs().max().item())
        token = outputs["logits"].cpu().argmax(dim=2)[:, -1:]
        if mask_on_cpu:
            mask = torch.roll(inputs["attention_mask"][:, :, -1:, :], shifts=-1, dims=-1)
            mask[:, :, :, -1] = 0
        else:
            mask = torch.roll(inputs["attention_mask"], shifts=-1, dims=-1)
            mask[:, -1] = 1
        inputs = {"input_ids": token, "attention_mask": mask,
                  "position_ids": inputs["position_ids"][:, -1:] + 1,
                  "past_key_values": outputs["next_past_key_values"].cpu()}
        generated.append(token)
    context.close()
    return torch.cat(generated, 1), worst


def _generate(model, tokenizer, text, new=NEW):
    ids = tokenizer(_prompt(tokenizer, text), return_tensors="pt")["input_ids"]
    # No stop at </s>: the flow above always runs `new` steps.
    config = transformers.GenerationConfig(do_sample=False, max_new_tokens=new, pad_token_id=0)
    out = model.generate(ids, generation_config=config)
    return out[:, ids.shape[1]:]


@pytest.mark.parametrize("option", [
    {}, {"mask_on_cpu": True}, {"device": "pfvm:cpu"}, {"cache": False},
    {"compile_prefill": False}, {"compile_decode": False}, {"check": False},
], ids=["plain", "mask_on_cpu", "pfvm_cpu", "no_cache", "eager_prefill", "eager_decode",
        "unchecked"])
def test_llm_infer_flow_equals_generate(model_dirs, tmp_path, option):
    model, tokenizer = _load(model_dirs["plain"])
    ids, worst = generate_like_llm_infer(model, tokenizer, PROMPT, tmp_path, **option)
    assert torch.equal(ids, _generate(model, tokenizer, PROMPT))
    assert worst <= 1e-4, worst


def test_llm_infer_flow_with_a_chat_template(model_dirs, tmp_path):
    model, tokenizer = _load(model_dirs["chat"])
    assert "<|assistant|>" in _prompt(tokenizer, "Hi")
    ids, worst = generate_like_llm_infer(model, tokenizer, PROMPT, tmp_path, length=64)
    assert torch.equal(ids, _generate(model, tokenizer, PROMPT))
    assert worst <= 1e-4, worst


def test_mask_helper_gives_the_logits_of_the_models_own_mask(model_dirs):
    """The 4-D mask from MLSDK's positions (cumsum, from 1) gives the logits the model
    computes from the 2-D mask itself; positions from 0 would let each token see the next."""
    model, tokenizer = _load(model_dirs["plain"])
    inputs = tokenizer(["Hi MN", PROMPT], return_tensors="pt", padding="max_length",
                       max_length=LENGTH)
    mask2d = inputs["attention_mask"]
    positions = mask2d.cumsum(1)
    with torch.no_grad():
        own = model(input_ids=inputs["input_ids"], attention_mask=mask2d,
                    position_ids=positions).logits
        helped = model(input_ids=inputs["input_ids"], position_ids=positions,
                       attention_mask=prepare_mask(mask2d, positions, model.dtype)).logits
        shifted = model(input_ids=inputs["input_ids"], position_ids=positions,
                        attention_mask=prepare_mask(mask2d, positions - 1, model.dtype)).logits
    real = mask2d.bool()
    torch.testing.assert_close(helped[real], own[real], rtol=1e-5, atol=1e-5)
    assert (shifted[real] - own[real]).abs().max() > 1e-2  # the test can see the off-by-one


def test_mask_on_cpu_generation_through_the_helper_in_eager(model_dirs, tmp_path):
    """Without compiling anything: the helper's mask, shifted each step as the example does,
    generates what model.generate does."""
    model, tokenizer = _load(model_dirs["plain"])
    ids, _ = generate_like_llm_infer(model, tokenizer, PROMPT, tmp_path,
                                     compile_prefill=False, compile_decode=False, check=False,
                                     mask_on_cpu=True, length=16, new=8)
    assert torch.equal(ids, _generate(model, tokenizer, PROMPT, new=8))
