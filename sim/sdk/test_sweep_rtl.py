"""Two RTL sweep points (mncore_hdl.sweep) on $SIM's simulator, in-process and on local Ray."""

from __future__ import annotations

import os

import pytest
from mncore_hdl.sweep import ResultStore, SweepSpec, ray_available, run_sweep
from mncore_hdl.testing.runner import require_simulator, simulator

#: A small window builds fast; two traffic patterns on two ports, 1 Ki LW each.
SPEC = {"grid": {"pattern": ["read", "random"]},
        "fixed": {"sim_window_lw": 1 << 14, "ports": 2, "lw": 1024},
        "figures": ("efficiency", "cycles", "wall_s"), "timeout_s": 900}


def _cycles(result) -> list[tuple]:
    return [(r["key"], r["status"], r["error"], r["figures"].get("cycles")) for r in result.records]


def test_rtl_points_in_process_and_on_ray(tmp_path):
    require_simulator()
    spec = SweepSpec("rtl_points", backend=simulator(), **SPEC)
    here = run_sweep(spec, ResultStore(tmp_path / "here.jsonl"), progress=False)
    assert [r["status"] for r in here.records] == ["ok", "ok"], here.failed
    read, rand = (r["figures"] for r in here.records)
    assert read["efficiency"] > 0.9 > rand["efficiency"] > 0.3, (read, rand)
    again = run_sweep(spec, ResultStore(tmp_path / "here.jsonl"), progress=False)
    assert (again.computed, again.reused) == (0, 2)
    if not ray_available():
        pytest.skip("ray is not installed (the [ray] extra): the Ray half of this test skipped")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    there = run_sweep(spec, ResultStore(tmp_path / "ray.jsonl"), ray=True, progress=False)
    assert there.computed == 2
    assert _cycles(there) == _cycles(here)
