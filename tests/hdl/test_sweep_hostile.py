"""Hostile sweep specs and results files: each gives a clear ValueError, never a hang, a crash or
a write elsewhere (issue 38, items 2 and 3)."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest
from mncore_hdl.sweep import ResultStore, SweepSpec, load_spec, run_sweep
from mncore_hdl.sweep.__main__ import main
from mncore_hdl.sweep.spec import MAX_POINTS
from mncore_hdl.sweep.store import ResultsError, check_record

GRID = {"ports": [1, 2], "trcd": [12, 16]}


def _spec(**kw) -> SweepSpec:
    return SweepSpec(kw.pop("name", "hostile"), grid=kw.pop("grid", GRID),
                     fixed=kw.pop("fixed", {"lw": 256}), **kw)


# -- specs ----------------------------------------------------------------------------------------


def test_a_point_count_explosion_is_refused_before_any_point_is_built():
    grid = {name: list(range(100)) for name in ("ports", "trcd", "trp", "tras", "banks")}
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"10000000000 points .* at most {MAX_POINTS}"):
        SweepSpec("boom", grid=grid)
    assert time.perf_counter() - t0 < 1


@pytest.mark.parametrize("name", ["../../escape", "/abs", ".hidden", "a/b", "", "x" * 200])
def test_a_spec_name_that_is_not_one_folder_is_refused(name):
    with pytest.raises(ValueError, match="Sweep name must be"):
        _spec(name=name)


@pytest.mark.parametrize("timeout", [-1, 0, "soon", True, 1e12])
def test_an_absurd_timeout_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout_s must be"):
        _spec(timeout_s=timeout)


@pytest.mark.parametrize("text", ["[1, 2]", '{"name": "x", "grid": [1, 2]}', "nul\0l",
                                  '{"name": "x", "grid": {}, "color": "red"}'])
def test_a_malformed_spec_file_is_a_value_error(tmp_path, text):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="spec|grid|Unknown"):
        load_spec(path)


def test_the_cli_refuses_a_spec_whose_name_escapes_build(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "../../../escaped", "grid": GRID}))
    assert main([str(spec), "--no-progress"]) == 2
    assert "Sweep name must be" in capsys.readouterr().err
    assert not (tmp_path.parent / "escaped").exists()


# -- results files ----------------------------------------------------------------------------


def test_a_truncated_results_file_resumes_and_keeps_the_new_records(tmp_path):
    path = tmp_path / "results.jsonl"
    run_sweep(_spec(), ResultStore(path), progress=False)
    lines = path.read_text().splitlines()
    # killed while writing the last record: half a line, no newline
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    store = ResultStore(path)
    assert (len(store), store.skipped) == (3, 1)
    result = run_sweep(_spec(), store, progress=False)
    assert (result.computed, result.reused) == (1, 3)
    again = ResultStore(path)
    assert (len(again), again.skipped) == (4, 1)  # the re-run point survived the half line


def _append(path: str, tag: int, count: int) -> None:
    store = ResultStore(path)
    for index in range(count):
        key = f"{tag:032x}{index:032x}"
        store.add({"key": key, "params": {"pad": "x" * 70000}, "backend": "model",
                   "status": "ok", "figures": {"cycles": index}, "error": None})


def test_two_sweeps_appending_to_one_file_interleave_whole_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append, args=(str(path), tag, 20)) for tag in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    store = ResultStore(path)
    assert (len(store), store.skipped) == (40, 0)


def test_a_symlinked_results_file_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me\n")
    link = tmp_path / "results.jsonl"
    link.symlink_to(target)
    with pytest.raises(ResultsError, match="not a regular file"):
        ResultStore(link)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(ResultsError, match="not a regular file"):
        run_sweep(_spec(), ResultStore(dangling), progress=False)
    assert target.read_text() == "keep me\n" and not (tmp_path / "nowhere.jsonl").exists()


@pytest.mark.parametrize("edit, match", [
    ({"figures": "fast"}, "figures must be an object"),
    ({"status": 5}, "status must be one of"),
    ({"key": "../x"}, "key must be a SHA-256"),
    ({"figures": {"cycles": "many"}}, r"figures\['cycles'\] must be a number"),
    ({"backend": "fpga"}, "backend must be one of"),
    ({"params": []}, "params must be an object"),
])
def test_a_record_that_lies_names_its_line_and_field(tmp_path, edit, match):
    path = tmp_path / "results.jsonl"
    run_sweep(_spec(), ResultStore(path), progress=False)
    lines = path.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), **edit})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError, match=rf"results.jsonl:3: {match}"):
        ResultStore(path)


def test_a_results_file_past_the_limit_is_refused(tmp_path, monkeypatch):
    import mncore_hdl.sweep.store as store

    monkeypatch.setattr(store, "MAX_RESULTS_BYTES", 1000)
    path = tmp_path / "results.jsonl"
    with open(path, "wb") as handle:
        handle.truncate(1 << 20)
    with pytest.raises(ResultsError, match="more than 1000"):
        ResultStore(path)


def test_check_record_accepts_what_a_sweep_writes(tmp_path):
    path = tmp_path / "results.jsonl"
    result = run_sweep(_spec(), ResultStore(path), progress=False)
    for record in result.records:
        check_record(record)
