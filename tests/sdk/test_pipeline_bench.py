"""bench/bench_pipeline.py at a tiny size: every shape's row, negotiated never behind."""

from __future__ import annotations

import re
import subprocess
import sys

from mncore_hdl.paths import repo_root

BENCH = repo_root() / "bench" / "bench_pipeline.py"


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=600, check=False)


def test_usage_errors():
    bad = run_bench("--shapes", "ring")
    assert bad.returncode == 2 and "--shapes: unknown ring" in bad.stderr
    bad = run_bench("--kib", "a lot")
    assert bad.returncode == 2 and "--kib: comma-separated integers" in bad.stderr


def test_tiny_run_prints_every_shape_side_by_side():
    done = run_bench("--kib", "16")
    assert done.returncode == 0, done.stderr
    row = re.compile(r"^(\S+)\s+16 KiB \|\s+(\d+)\s+(\d+) \|\s+(\d+)\s+(\d+) \|\s+(\d+)\s+(\d+)"
                     r"\s+(\d+) \|\s+[\d.]+x\s+[\d.]+x$", re.M)
    rows = {m[1]: [int(v) for v in m.groups()[1:]] for m in row.finditer(done.stdout)}
    assert set(rows) == {"chain3", "fanout3", "decode4", "enc-dec2"}, done.stdout
    for name, (_, defaults, _, manual, _, negotiated, plan) in rows.items():
        assert negotiated <= min(defaults, manual), (name, done.stdout)
        # the plan's model of the compiled pipeline is what the run measures
        assert plan == negotiated, (name, done.stdout)
