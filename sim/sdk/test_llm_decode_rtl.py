"""One decode step of a tiny Hugging Face Llama (a prefill, then a decode step whose cache is
relocated from it) on ``mncore2:icarus`` and ``mncore2:verilator`` gives what the functional
model gives: the tokens, the cache read back, and the report (the same commands, bytes per path,
conversions and relocations per record; cycles are measured on one and modeled on the other);
and Whisper's encoder hands its output to the decoder by relocation there, the converter's own
counters moving no byte."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from mlsdk import Context, MNDevice
from mlsdk.testing.examples import run_example
from mlsdk.testing.flows import comparable_records, require_device

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")
from mlsdk.experimental.llm.generation import CompiledGenerator  # noqa: E402
from mlsdk.experimental.llm.tiny import tiny_llama  # noqa: E402

SEED = 25


def _decode_step(device: str, tmp: Path) -> tuple[torch.Tensor, list[Any]]:
    model = tiny_llama(seed=SEED, vocab_size=64, hidden_size=32, intermediate_size=64,
                       num_hidden_layers=1)
    ids = torch.randint(3, 64, (1, 4), generator=torch.Generator().manual_seed(SEED))
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        generator = CompiledGenerator(context, model, batch=1, prompt_length=4,
                                      cache_length=8, codegen_dir=tmp)
        tokens = generator.generate(ids, torch.ones_like(ids), 2)
        assert len(context.report().calls("decode")) == 1
        bound = generator.decode.bindings["past_key_values"]
        assert bound.nbytes == generator.decode.input_specs["past_key_values"].nbytes
        records = comparable_records(context.report())
    return tokens, records


@pytest.mark.parametrize("device", ["mncore2:icarus", "mncore2:verilator"])
def test_llama_decode_step_on_rtl_matches_the_model(tmp_path: Path, device: str) -> None:
    require_device(device)
    tokens, records = _decode_step(device, tmp_path / "rtl")
    want_tokens, want_records = _decode_step("mncore2:auto", tmp_path / "model")
    assert torch.equal(tokens, want_tokens)
    assert records == want_records
    decode = [r for r in records if r["function"] == "decode" and r["kind"] == "call"]
    assert [(r["bytes"]["host"], r["bytes"]["converter"]) for r in decode] == [(0, 0)]


@pytest.mark.parametrize("device", ["mncore2:icarus", "mncore2:verilator"])
def test_whisper_encoder_to_decoder_relocates_on_rtl(tmp_path: Path, device: str) -> None:
    require_device(device)
    run = run_example("encoder_decoder.py", "--device", device, "--tokens", "2", cwd=tmp_path,
                      env={"TMPDIR": str(tmp_path)}, timeout=900)
    lines = run.stdout.splitlines()
    assert lines[-2].endswith("equal"), run.stdout
    assert lines[-1] == ("decoder calls: 2, relocations 2, conversions 0, converter bytes 0"), \
        run.stdout
