"""mncore_hdl.sweep: specs by field name, content-hashed results reused, in-process and on Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from mncore_hdl import arch
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.converter.program import DEFAULT_BUFFER_LW
from mncore_hdl.paths import repo_root
from mncore_hdl.sweep import (
    ResultStore,
    SweepSpec,
    adapter,
    known_fields,
    load_spec,
    point_key,
    ray_available,
    resolve,
    run_sweep,
)
from mncore_hdl.sweep.__main__ import main
from mncore_hdl.sweep.report import design_params, pareto_front, table
from mncore_hdl.sweep.workload import Workload

#: 8 timing-model points: 2 ports x 2 patterns x 2 tRCD values.
GRID = {"ports": [1, 2], "pattern": ["read", "mixed"], "trcd": [12, 16]}


def _spec(**kw) -> SweepSpec:
    return SweepSpec("unit", grid=kw.pop("grid", GRID), fixed=kw.pop("fixed", {"lw": 2048}), **kw)


def _figures(result) -> list[tuple]:
    """What must agree between two runs of one sweep (wall time aside)."""
    return [(r["key"], r["status"], {k: v for k, v in r["figures"].items() if k != "wall_s"})
            for r in result.records]


# -- spec and parameters --------------------------------------------------------------------

def test_parameters_by_field_name():
    config, work = resolve(MNCORE2_SIM, {"banks": 8, "trcd": 16, "ports": 3, "lw": 1024})
    assert (config.banks, config.timing.trcd, work.ports, work.lw) == (8, 16, 3, 1024)
    assert config.timing.cl == MNCORE2_SIM.timing.cl  # the rest of the base stays
    # Timing applies before geometry: a row and a burst that only fit together.
    config, _ = resolve(MNCORE2_SIM, {"row_lw": 16, "burst_length": 16})
    assert (config.row_lw, config.timing.burst_length) == (16, 16)


def test_unknown_parameter_names_the_known_fields():
    with pytest.raises(ValueError, match="'scheduler_windw'.*ArchConfig.*banks.*trcd.*pattern"):
        _spec(grid={"scheduler_windw": [4, 8]})
    assert "banks" in known_fields()["arch"] and "cl" in known_fields()["timing"]


def test_invalid_point_and_spec_errors():
    with pytest.raises(ValueError, match=r"point \{.*'banks': 12.*power of two"):
        _spec(grid={"banks": [12]}).points()
    with pytest.raises(ValueError, match="backend must be one of model, icarus, verilator"):
        _spec(backend="gem5")
    with pytest.raises(ValueError, match="Grid parameter 'ports' must list at least one"):
        _spec(grid={"ports": []})
    with pytest.raises(ValueError, match="Unknown sweep spec key"):
        SweepSpec.from_dict({"name": "x", "grid": {}, "figurs": []})


def test_timing_preset_by_name(monkeypatch):
    if not hasattr(arch, "TIMING_PRESETS"):
        with pytest.raises(ValueError, match="preset must be one of: none"):
            resolve(MNCORE2_SIM, {"timing_preset": "gddr6"})
    slow = DramTiming(cl=20, trcd=20)
    monkeypatch.setattr(arch, "TIMING_PRESETS", {"slow": slow}, raising=False)
    config, _ = resolve(MNCORE2_SIM, {"timing_preset": "slow", "trp": 15})
    assert config.timing == DramTiming(cl=20, trcd=20, trp=15)
    with pytest.raises(ValueError, match="one of: slow; not 'fast'"):
        resolve(MNCORE2_SIM, {"timing_preset": "fast"})


def test_point_key_follows_config_workload_backend():
    a, b, c = _spec(grid={"trcd": [12, 16, 12]}).points()
    assert point_key(a) == point_key(c) != point_key(b)
    (d,) = _spec(grid={"trcd": [12]}, fixed={"lw": 4096}).points()
    assert point_key(d) != point_key(a)
    (e,) = _spec(grid={"trcd": [12]}, backend="icarus").points()
    assert point_key(e) != point_key(a)


# -- running, resuming, failing ---------------------------------------------------------------

def test_sweep_in_process_then_resumed(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    first = run_sweep(_spec(), store, progress=False)
    assert (first.computed, first.reused, first.failed) == (8, 0, [])
    by = {(r["params"]["ports"], r["params"]["pattern"], r["params"]["trcd"]): r["figures"]
          for r in first.records}
    assert by[(1, "read", 16)]["cycles"] > by[(1, "read", 12)]["cycles"]
    assert by[(2, "read", 12)]["cycles"] > by[(1, "read", 12)]["cycles"]
    again = run_sweep(_spec(), ResultStore(tmp_path / "r.jsonl"), progress=False)
    assert (again.computed, again.reused) == (0, 8)
    assert _figures(again) == _figures(first)
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 8  # nothing re-appended


def test_interrupted_sweep_runs_only_the_rest(tmp_path):
    path = tmp_path / "r.jsonl"
    run_sweep(_spec(grid={**GRID, "ports": [1]}), ResultStore(path), progress=False)
    with open(path, "a") as f:
        f.write('{"key": "half a line')  # a run killed mid-write
    rest = run_sweep(_spec(), ResultStore(path), progress=False)
    assert (rest.computed, rest.reused) == (4, 4)


def test_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    # The timing model describes one-row sequential bursts only: 32 LW is refused.
    spec = _spec(grid={"burst_lw": [0, 32, 256]}, fixed={"lw": 2048, "pattern": "read"})
    result = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False)
    status = [r["status"] for r in result.records]
    assert status == ["ok", "error", "ok"]
    assert "describes one-row bursts" in result.failed[0]["error"]
    assert "error: ValueError" in table(result.records, spec.swept, spec.figures)
    # Stored failures are reused too, unless asked to retry.
    assert run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False).computed == 0
    retried = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), retry_failed=True,
                        progress=False)
    assert retried.computed == 1


def test_random_points_on_the_model_with_their_bound(tmp_path):
    spec = _spec(grid={"scheduler": ["in_order", "fr_fcfs"], "pattern": ["random", "read"]},
                 fixed={"lw": 2048, "ports": 3, "scheduler_window": 16},
                 figures=("efficiency", "bound_ratio", "cycles"))
    result = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False)
    by = {(r["params"]["scheduler"], r["params"]["pattern"]): r for r in result.records}
    assert all(r["status"] == "ok" for r in result.records), result.failed
    for r in result.records:
        assert 0 < r["figures"]["bound_ratio"] <= 1
    # reordering gains on random traffic, not on sequential streams
    rnd_in, rnd_fr = by[("in_order", "random")], by[("fr_fcfs", "random")]
    assert rnd_fr["figures"]["cycles"] < rnd_in["figures"]["cycles"]
    seq_in, seq_fr = by[("in_order", "read")], by[("fr_fcfs", "read")]
    assert seq_fr["figures"]["cycles"] == seq_in["figures"]["cycles"]


def test_point_over_its_timeout_is_recorded(tmp_path, monkeypatch):
    real = adapter.model_figures

    def slow(config, workload):
        if workload.ports == 2:
            time.sleep(5)
        return real(config, workload)

    monkeypatch.setattr(adapter, "model_figures", slow)
    spec = _spec(grid={"ports": [1, 2]}, timeout_s=0.3)
    t0 = time.perf_counter()
    result = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False)
    assert time.perf_counter() - t0 < 3
    assert [r["status"] for r in result.records] == ["ok", "timeout"]
    assert "0.3 s timeout" in result.records[1]["error"]


def test_conversion_points_and_buffer_depth(tmp_path):
    spec = SweepSpec("conv", grid={"buffer_lw": [1024, 8192], "pair": ["transpose"]},
                     fixed={"kind": "convert", "shape": [128, 128]},
                     figures=("cycles", "converter_bytes", "bound_ratio", "area_bits"))
    small, big = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False).records
    assert small["status"] == big["status"] == "ok"
    assert small["figures"]["converter_bytes"] == 2 * 128 * 128 * 4
    assert (small["figures"]["area_bits"], big["figures"]["area_bits"]) == (1024 * 64, 8192 * 64)
    assert 0 < small["figures"]["bound_ratio"] <= 1


def test_rtl_conversion_point_refuses_a_buffer_it_cannot_run(tmp_path):
    # Refused before any simulator starts: the RTL converter bench has the default buffer.
    spec = SweepSpec("conv_rtl", grid={"buffer_lw": [1024]}, backend="icarus",
                     fixed={"kind": "convert", "shape": [64, 64]})
    (record,) = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), progress=False).records
    assert record["status"] == "error"
    assert f"default {DEFAULT_BUFFER_LW}-LW buffer, not buffer_lw=1024" in record["error"]
    assert Workload().buffer_lw == DEFAULT_BUFFER_LW  # a sweep's default point runs on the RTL


@pytest.fixture(scope="module")
def local_ray():
    if not ray_available():
        pytest.skip("ray is not installed (the [ray] extra: pip install -e '.[ray]')")
    import os

    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=128 << 20)
    yield ray
    ray.shutdown()


def test_same_results_on_local_ray(tmp_path, local_ray):
    here = run_sweep(_spec(), ResultStore(tmp_path / "here.jsonl"), progress=False)
    there = run_sweep(_spec(), ResultStore(tmp_path / "ray.jsonl"), ray=True, progress=False)
    assert there.computed == 8
    assert _figures(there) == _figures(here)
    resumed = run_sweep(_spec(), ResultStore(tmp_path / "ray.jsonl"), ray=True, progress=False)
    assert (resumed.computed, resumed.reused) == (0, 8)


def test_failing_point_on_ray_is_recorded(tmp_path, local_ray):
    spec = _spec(grid={"burst_lw": [32, 0]}, fixed={"lw": 2048, "pattern": "read"})
    result = run_sweep(spec, ResultStore(tmp_path / "r.jsonl"), ray=True, progress=False)
    assert [r["status"] for r in result.records] == ["error", "ok"]


def test_timeout_holds_inside_a_ray_task(local_ray):
    # Ray runs a task on its worker's main thread, where the point's SIGALRM deadline works.
    # (Defined here so that Ray ships the function itself: workers cannot import this module.)
    def _sleep_pastdeadline() -> str:
        import time

        from mncore_hdl.sweep.execute import PointTimeout, deadline

        try:
            with deadline(0.3):
                time.sleep(5)
        except PointTimeout as exc:
            return str(exc)
        return "no timeout"

    task = local_ray.remote(num_cpus=1, max_retries=0)(_sleep_pastdeadline)
    assert local_ray.get(task.remote()) == "point ran past its 0.3 s timeout"


# -- report and CLI ------------------------------------------------------------------------------

def test_pareto_front():
    pts = [(1, 10), (2, 8), (2, 9), (3, 8), (4, 3), (5, 4)]
    assert pareto_front(pts) == [(1, 10), (2, 8), (4, 3)]


def test_design_params_are_those_that_move_the_area():
    def rec(ports, trcd, area):
        return {"status": "ok", "params": {"ports": ports, "trcd": trcd},
                "figures": {"area_bits": area}}

    records = [rec(p, t, 100 * p) for p in (1, 2) for t in (12, 16)]
    assert design_params(records, ["ports", "trcd"]) == ["ports"]


def test_cli_prints_the_table_and_writes_the_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the [dev] extra)")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "cli", "grid": {"trcd": [12, 16]},
                                "fixed": {"lw": 1024}, "figures": ["efficiency", "cycles"]}))
    out = tmp_path / "r.jsonl"
    assert main([str(spec), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "trcd" in text and "efficiency" in text and "2 run (this process)" in text
    assert (tmp_path / "plot.png").stat().st_size > 0
    assert main([str(spec), "--out", str(out), "--no-progress"]) == 0
    assert "0 run (this process), 2 reused" in capsys.readouterr().out


def test_cli_refuses_a_bad_spec_before_running(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "bad", "grid": {"scheduler_windw": [4]}}))
    assert main([str(spec), "--out", str(tmp_path / "r.jsonl"), "--no-progress"]) == 2
    assert "Unknown sweep parameter(s) 'scheduler_windw'" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()


REPO = repo_root()


@pytest.mark.parametrize("name", ["model_memctrl.json", "model_convert_buffer.json",
                                  "rtl_ports_pattern_burst.json"])
def test_example_specs_resolve(name):
    spec = load_spec(REPO / "bench" / "sweeps" / name)
    assert len(spec.points()) >= 48


def test_example_spec_of_the_scheduler_sweeps_its_fields():
    points = load_spec(REPO / "bench" / "sweeps" / "window_ports_pattern.toml").points()
    assert len(points) == 48
    assert {p.config.scheduler_window for p in points} == {4, 8, 16, 32}
    assert {p.config.scheduler for p in points} == {"fr_fcfs"}


def test_bench_sweep_help():
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_sweep.py"), "--help"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "one process and on a local Ray cluster" in run.stdout
