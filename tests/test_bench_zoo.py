"""bench/bench_zoo.py: its model list (at least 40 transformers architectures) and its table
from a rows file, without compiling anything (the bench itself runs for an hour)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mncore_hdl.paths import repo_root

pytest.importorskip("transformers", reason="the zoo is built from transformers configs")
BENCH = repo_root() / "bench" / "bench_zoo.py"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=300, check=True)
    return done.stdout


def test_lists_the_zoo_and_prints_a_table_from_rows(tmp_path):
    names = _run("--list").split()
    assert len(names) >= 40 and {"llama", "bert", "t5", "vit", "whisper"} <= set(names)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"name": "llama", "infer": "ok", "train": "refused", "missing": ["aten.foo.default"],
         "ratio": 2.0, "detail": "train: why"},
        {"name": "bert", "infer": "mismatch", "train": "ok", "missing": [], "ratio": None,
         "detail": ""}]))
    text = _run("--table-from", str(rows))
    assert "| llama | causal-lm | ok | refused | aten.foo.default | 2.0 | train: why |" in text
    assert "| t5 | seq2seq | not run | not run |" in text
    assert "| inference | 2 | 1 (50%) | 1 | 0 | 0 | 0 |" in text
    assert "| aten.foo.default | 1 |" in text


def test_an_ill_conditioned_result_matches_only_within_eager_float32s_own_error():
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("bench_zoo", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    exact = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64)}
    eager = {"w": torch.tensor([1.001, 2.0])}  # float32's own error: 1e-3
    near = {"w": torch.tensor([1.0, 2.004])}  # 4 times that: rounding in another order
    wrong = {"w": torch.tensor([1.0, 2.5])}  # 500 times: a wrong op
    assert "4.0x" in bench.within_conditioning(near, eager, exact)
    assert bench.within_conditioning(wrong, eager, exact) is None
    assert bench.within_conditioning(near, eager, None) is None  # no float64 run: no excuse
