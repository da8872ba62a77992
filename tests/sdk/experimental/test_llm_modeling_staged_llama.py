"""mlsdk.experimental.llm.modeling_staged_llama: a Llama split into pipeline stages, each
compiled in a Context of its own as MLSDK's ``compile_pp_llama.py`` does, against the unsplit
model in eager, for the prefill and the decode phase."""

from __future__ import annotations

import inspect
import os

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.experimental.llm.kv_cache import kv_cache_to_legacy, kv_cache_to_tensor
from mlsdk.experimental.llm.modeling_staged_llama import split_llama, stage_layers
from mlsdk.experimental.llm.tiny import tiny_llama

os.environ["HF_HUB_OFFLINE"] = "1"
LENGTH = 6


def _model():
    return tiny_llama(hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      vocab_size=128, max_position_embeddings=64)


def _inputs(model, phase: str) -> dict[str, torch.Tensor]:
    config = model.config
    g = torch.Generator().manual_seed(3)
    if phase == "prefill":
        return {"input_ids": torch.randint(0, config.vocab_size, (1, LENGTH), generator=g),
                "attention_mask": torch.ones(1, 1, LENGTH, LENGTH),
                "position_ids": torch.ones(1, LENGTH).cumsum(1)}
    head_dim = config.hidden_size // config.num_attention_heads
    return {"input_ids": torch.randint(0, config.vocab_size, (1, 1), generator=g),
            "attention_mask": torch.ones(1, 1, 1, LENGTH),
            "position_ids": torch.full((1, 1), 10),
            "past_key_values": torch.rand(config.num_hidden_layers, 2, 1,
                                          config.num_key_value_heads, LENGTH - 1, head_dim,
                                          generator=g)}


def _unsplit(model, inputs):
    """The whole model on the same inputs: logits and the stacked cache after the call."""
    kwargs = {k: v for k, v in inputs.items() if k != "past_key_values"}
    if "past_key_values" in inputs:
        name = "cache" if "cache" in inspect.signature(model.forward).parameters \
            else "past_key_values"
        kwargs[name] = kv_cache_to_legacy(inputs["past_key_values"])
    with torch.no_grad():
        out = model(**kwargs, use_cache=True)
    cache = out["cache"] if "cache" in out else out.past_key_values
    return out.logits, kv_cache_to_tensor(cache)


def _run_stages(model, inputs, n_stages, device, tmp_path, phase):
    """MLSDK's compile_pp_llama flow: each stage compiled in its own Context, its outputs
    read back to the host and handed to the next stage."""
    stages = split_llama(model, n_stages)
    ranges = stage_layers(model.config.num_hidden_layers, n_stages)
    h: dict[str, torch.Tensor] = {}
    caches = []
    for index, stage in enumerate(stages):
        context = Context(MNDevice(device))
        context.registry.register("model", stage)
        if index == 0:
            def forward(d, stage=stage):
                return stage(**d)
            feed = {"input_ids": inputs["input_ids"], "position_ids": inputs["position_ids"]}
        elif index == len(stages) - 1:
            def forward(d, stage=stage):
                return stage(**d)
            feed = {"hidden_states": h["hidden_states_out"]}
        else:
            def forward(d, stage=stage):
                d = dict(d)
                d["past_key_values"] = (kv_cache_to_legacy(d["past_key_values"])
                                        if "past_key_values" in d else None)
                out = stage(**d)
                out["past_key_values_out"] = kv_cache_to_tensor(
                    out["past_key_values_out"])[:, :, :, :, 1:, :]
                return out
            feed = {"hidden_states": h["hidden_states_out"],
                    "position_embeddings_cos": h["position_embeddings_cos_out"],
                    "position_embeddings_sin": h["position_embeddings_sin_out"],
                    "attention_mask": inputs["attention_mask"],
                    "position_ids": inputs["position_ids"]}
            if "past_key_values" in inputs:
                span = ranges[index - 1]
                feed["past_key_values"] = inputs["past_key_values"][span.start:span.stop]
        fn = context.compile(forward, feed, storage.path(tmp_path / phase / f"stage_{index}"))
        h = {k: v.cpu() for k, v in fn(feed).items()}
        context.invalidate()
        if "past_key_values_out" in h:
            caches.append(h["past_key_values_out"])
    return h["logits"], torch.cat(caches)


@pytest.mark.parametrize(("n_stages", "phase"), [(4, "prefill"), (4, "decode"), (3, "decode")])
def test_staged_llama_equals_the_unsplit_model(tmp_path, phase, n_stages):
    model = _model()
    inputs = _inputs(model, phase)
    logits, cache = _unsplit(model, inputs)
    got_logits, got_cache = _run_stages(model, inputs, n_stages, "mncore2:auto", tmp_path,
                                        phase)
    torch.testing.assert_close(got_logits, logits, rtol=0, atol=1e-5)
    assert got_cache.shape == cache[:, :, :, :, 1:].shape
    for layer in range(cache.shape[0]):
        for kv in range(2):
            torch.testing.assert_close(got_cache[layer, kv], cache[layer, kv, :, :, 1:],
                                       rtol=0, atol=1e-5,
                                       msg=lambda m, layer=layer, kv=kv: f"kv {layer} {kv}: {m}")


def test_stages_share_the_model_parameters_and_keep_it_whole():
    model = _model()
    stages = split_llama(model, 4)
    owned = {id(p) for p in model.parameters()}
    assert all(id(p) in owned for stage in stages for p in stage.parameters())
    # The decoder stages count their layers from 0; the model's own layers are unchanged.
    assert [layer.self_attn.layer_idx for layer in stages[2].layers] == [0, 1]
    assert [layer.self_attn.layer_idx for layer in model.model.layers] == [0, 1, 2, 3]
    assert set(stages[1](**{k: v for k, v in _stage1_inputs(model).items()})) == {
        "hidden_states_out", "position_embeddings_cos_out", "position_embeddings_sin_out",
        "past_key_values_out"}


def _stage1_inputs(model):
    inputs = _inputs(model, "prefill")
    first = split_llama(model, 4)[0](input_ids=inputs["input_ids"],
                                      position_ids=inputs["position_ids"])
    return {"hidden_states": first["hidden_states_out"],
            "position_embeddings_cos": first["position_embeddings_cos_out"],
            "position_embeddings_sin": first["position_embeddings_sin_out"],
            "attention_mask": inputs["attention_mask"], "position_ids": inputs["position_ids"]}


@pytest.mark.parametrize(("n_stages", "message"), [
    (2, "n_stages >= 3"),
    (True, "n_stages >= 3"),
    (5, r"leave stage\(s\) \[3\] without layers"),
])
def test_split_errors_name_what_was_given(n_stages, message):
    with pytest.raises(ValueError, match=message):
        split_llama(_model(), n_stages)


def test_split_takes_a_llama_only():
    with pytest.raises(TypeError, match="takes a Llama causal LM"):
        split_llama(torch.nn.Linear(2, 2), 3)


def test_a_decoder_stage_names_the_mask_it_takes():
    model = _model()
    inputs = _stage1_inputs(model)
    inputs["attention_mask"] = torch.ones(1, LENGTH)
    with pytest.raises(ValueError, match="additive 4-D attention mask"):
        split_llama(model, 4)[1](**inputs)
