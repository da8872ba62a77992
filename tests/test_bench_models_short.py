"""bench/bench_models.py: its --help, and a small run that times what compiles and reports what
does not compile yet with its unsupported ops."""

from __future__ import annotations

import re
import subprocess
import sys

from mncore_hdl.paths import repo_root

BENCH = repo_root() / "bench" / "bench_models.py"


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=600, check=False)


def test_help_and_usage_errors():
    shown = run_bench("--help")
    assert shown.returncode == 0 and "--models" in shown.stdout
    bad = run_bench("--models", "vgg")
    assert bad.returncode == 2 and "--models: unknown vgg" in bad.stderr


def test_small_run_times_the_mlp_and_the_gpt():
    done = run_bench("--models", "mlp,gpt", "--size", "small", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    timed = r"\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+\d+$"
    for mode in ("infer", "train"):
        assert re.search(rf"^mlp\s+{mode}{timed}", out, re.M), out
        # The GPT compiles (issue 23's ops): its row is timed like the MLP's.
        assert re.search(rf"^gpt\s+{mode}{timed}", out, re.M), out


def test_small_models_print_where_each_call_goes():
    done = run_bench("--small", "--models", "recsys", "--repeat", "1", "--clock", "cpu")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "interpreter / DRAM model / cycle model / host copies / front end" in out, out
    split = r"\s+" + r" / ".join([r"[\d.]+"] * 5) + "$"
    for mode in ("infer", "train"):
        assert re.search(rf"^recsys\s+{mode}\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+\d+{split}", out,
                         re.M), out


def test_call_split_prints_a_call_step_by_step():
    done = subprocess.run([sys.executable, str(BENCH.parent / "call_split.py"), "--model",
                           "recsys", "--calls", "20"], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"^recsys inference, one call with \.cpu\(\): [\d.]+ us", out, re.M), out
    for step in ("interpreter: run", "DRAM model: _run_planned", "front end (records)",
                 "front end (inputs checked: types, int64 ranges)", "the rest"):
        assert re.search(rf"^\s+-?[\d.]+ us  {re.escape(step)}", out, re.M), out
