"""bench/bench_llm.py: its usage errors, and a short run whose decode step moves no bytes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from mlsdk.testing.examples import ROOT

pytest.importorskip("transformers", reason="transformers is a test dependency of the kit")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "bench_llm.py"), *args],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": ":".join(str(ROOT / p) for p in
                                                      ("sdk", "compiler", "hdl"))})


def test_usage_errors():
    bad = _bench("--sizes", "huge")
    assert bad.returncode == 2 and "--sizes: unknown huge" in bad.stderr
    few = _bench("--tokens", "1")
    assert few.returncode == 2 and "--tokens must be at least 2" in few.stderr


def test_tiny_run_prints_a_decode_step_without_host_or_converter_bytes():
    done = _bench("--sizes", "tiny", "--caches", "static", "--tokens", "3", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    row = r"^tiny\s+static\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+0\s+0\s+\d+\s+[\d.]+\s+\d+$"
    assert re.search(row, done.stdout, re.M), done.stdout
