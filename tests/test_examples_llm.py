"""examples/llm_generate.py and examples/encoder_decoder.py run as their users run them."""

from __future__ import annotations

import re

import pytest
from mlsdk.testing.examples import run_example

pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def test_llm_generate_example_equals_generate_and_relocates_the_cache(tmp_path):
    out = run_example("llm_generate.py", "--tokens", "16", cwd=tmp_path, env=OFFLINE,
                      timeout=300).stdout
    assert out.count("equal") == 2 and "DIFFERENT" not in out
    assert len(re.findall(r"generated \[(\d+(, )?){16}\]", out)) == 2
    assert ("decode steps: 15, host bytes [0], converter bytes [0], relocations per step [4]"
            in out)


def test_encoder_decoder_example_hands_off_by_relocation(tmp_path):
    out = run_example("encoder_decoder.py", "--tokens", "4", cwd=tmp_path, env=OFFLINE,
                      timeout=300).stdout
    assert re.search(r"generated ids: \[(\d+(, )?){4}\]", out) and "DIFFERENT" not in out
    assert "decoder calls: 4, relocations 4, conversions 0, converter bytes 0" in out
