"""Hugging Face models, unmodified, compiled against eager on the same random weights.

Llama, GPT-2, BERT (each called as ``model(input_ids)`` and with a left-padded
``attention_mask``) and Whisper (encoder and decoder compiled as two functions, the encoder
with ``io_spec_constraints`` from the decoder's input, so its output is relocated into the
decoder), in transformers' default attention (SDPA) and ``attn_implementation="eager"``.

Tolerance (float32): ``rtol=1e-5, atol=1e-5``, as for the kit's own GPT
(``tests/models/test_model_gpt.py``): the device runs the aten ops torch traced, in torch's own
decomposition, but its matmuls and reductions may associate differently (an ulp or so per op).
"""

from __future__ import annotations

import os

import pytest
import torch
from mlsdk import storage
from mncore_compiler.errors import TraceError

os.environ["HF_HUB_OFFLINE"] = "1"  # tiny configs only: a download would be a bug
pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")
from mlsdk.experimental.llm import tiny  # noqa: E402

RTOL = ATOL = 1e-5
CAUSAL = {"llama": tiny.tiny_llama, "gpt2": tiny.tiny_gpt2, "bert": tiny.tiny_bert}


def _batch(seed: int, vocab: int = 256) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[0, :3] = 0  # row 0 left-padded, as a batch of prompts is for generation
    return {"input_ids": torch.randint(3, vocab, (2, 8), generator=g), "attention_mask": mask}


def _output(model, d: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(d["input_ids"], **({"attention_mask": d["attention_mask"]}
                                   if "attention_mask" in d else {}))
    return out.logits


@pytest.mark.parametrize("masked", [False, True], ids=["input_ids", "attention_mask"])
@pytest.mark.parametrize("attn", tiny.ATTENTION_IMPLEMENTATIONS)
@pytest.mark.parametrize("name", sorted(CAUSAL))
def test_model_matches_eager(context, tmp_path, seed, name, attn, masked):
    model = CAUSAL[name](attn, seed=seed)
    context.registry.register("model", model)
    batch = _batch(seed)
    if not masked:
        del batch["attention_mask"]
    forward = context.compile(lambda d: {"logits": _output(model, d)}, batch,
                              storage.path(tmp_path / name))
    sample = {k: v for k, v in _batch(seed + 1).items() if k in batch}
    got = forward(sample)["logits"].cpu()
    with torch.no_grad():
        torch.testing.assert_close(got, _output(model, sample), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("attn", tiny.ATTENTION_IMPLEMENTATIONS)
def test_whisper_encoder_hands_off_to_the_decoder_by_relocation(context, tmp_path, seed, attn):
    model = tiny.tiny_whisper(attn, seed=seed)
    context.registry.register("model", model)
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(1, 16, 32, generator=g)
    ids = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        hidden = model.model.encoder(features).last_hidden_state
        want = model(input_features=features, decoder_input_ids=ids).logits

    def decode(d):
        return {"logits": model(encoder_outputs=(d["encoder_hidden_states"],),
                                decoder_input_ids=d["decoder_input_ids"]).logits}

    def encode(d):
        return {"encoder_hidden_states": model.model.encoder(d["input_features"])
                .last_hidden_state}

    decoder = context.compile(decode, {"encoder_hidden_states": hidden, "decoder_input_ids": ids},
                              storage.path(tmp_path / "decoder"))
    spec = decoder.input_specs["encoder_hidden_states"]
    encoder = context.compile(encode, {"input_features": features},
                              storage.path(tmp_path / "encoder"),
                              io_spec_constraints={"encoder_hidden_states": spec})
    handed = encoder({"input_features": features})["encoder_hidden_states"]
    got = decoder({"encoder_hidden_states": handed, "decoder_input_ids": ids})["logits"].cpu()
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    call = context.report().calls()[-1]
    assert (call.relocations, call.conversions, call.bytes["converter"]) == (1, 0, 0)
    assert decoder.bindings["encoder_hidden_states"] == handed.buffer


def test_generate_itself_is_the_kits_trace_error_with_the_line(context, tmp_path, seed):
    # generate()'s Python loop reads token values (stopping criteria): it cannot be one
    # program; the error says so at transformers' line (compile the step instead, docs/llm.md).
    model = tiny.tiny_llama(seed=seed)
    with pytest.raises(TraceError, match=r"(?s)read a tensor's value in Python.*generation"):
        context.compile(lambda d: {"ids": model.generate(d["input_ids"], max_new_tokens=2,
                                                         do_sample=False)},
                        {"input_ids": torch.ones(1, 4, dtype=torch.int64)},
                        storage.path(tmp_path / "generate"))
