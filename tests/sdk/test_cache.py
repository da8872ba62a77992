"""The compile cache: hits and misses, its key, bad entries, concurrent writers, bad options."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from mlsdk import CacheError, CacheOptions, CacheWarning, Context, MNDevice, storage
from mlsdk.cache import cache_key, kit_version
from mlsdk.cachedir import CacheDir
from mlsdk.compiling import compile_to_directory
from mlsdk.testing.examples import run_example
from mncore_compiler.capture import Captured, capture
from mncore_compiler.driver import CompileRequest, function_name
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout
from mncore_hdl.paths import repo_root

ROOT = repo_root()
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("sdk", "compiler",
                                                                           "hdl"))}

def _compile_program(fn, sample, where, cache_options):
    """``mlsdk.compiling.compile_to_directory`` with the default request: (program, CacheResult)."""
    result = compile_to_directory(fn, sample, where, CompileRequest(name=function_name(fn)),
                             cache_options)
    return result.program, result.cache



def add(inputs):
    return {"out": inputs["x"] + inputs["y"]}


def double(inputs):
    return {"y": inputs["x"] * 2}


def inc(inputs):
    return {"z": inputs["y"] + 1}


def _sample(shape=(8, 16), dtype=torch.float32):
    return {"x": torch.randn(shape).to(dtype), "y": torch.randn(shape).to(dtype)}


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if not p.name.startswith("."))


def _compile(context, tmp_path, fn=add, sample=None, **kwargs):
    kwargs.setdefault("cache_options", CacheOptions(tmp_path / "cache"))
    return context.compile(fn, sample or _sample(), storage.path(tmp_path) / "out", **kwargs)


# -- hit and miss -------------------------------------------------------------------------------


def test_second_compile_is_a_hit_with_the_same_program(context, tmp_path, caplog):
    sample = _sample()
    with caplog.at_level(logging.INFO, logger="mlsdk.cache"):
        first = _compile(context, tmp_path, sample=sample)
        second = _compile(context, tmp_path, sample=sample)
    assert (first.cache_status, second.cache_status) == ("miss", "hit")
    assert first.input_specs == second.input_specs
    assert first.output_specs == second.output_specs
    expected = sample["x"] + sample["y"]
    assert torch.allclose(second(sample)["out"].cpu(), expected)
    messages = [r.getMessage() for r in caplog.records if r.name == "mlsdk.cache"]
    assert "cache miss" in messages[0] and "cache hit" in messages[1]
    assert len(_entries(tmp_path / "cache")) == 1
    # The codegen directory is whole and loads on its own.
    loaded = context.load_codegen_dir(storage.path(tmp_path) / "out")
    assert loaded.input_specs == first.input_specs


def test_hits_into_one_codegen_directory_leave_no_temporaries(context, tmp_path):
    for _ in range(3):
        _compile(context, tmp_path)
    out = tmp_path / "out"
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert names == ["program.json", "program.txt"]
    (out / "program.json").unlink()  # a damaged codegen directory is refilled by a hit
    assert _compile(context, tmp_path).cache_status == "hit"
    assert context.load_codegen_dir(storage.path(out)).name == "add"


def test_report_shows_hit_and_miss(context, tmp_path):
    _compile(context, tmp_path)
    _compile(context, tmp_path)
    report = context.report()
    compiles = [r for r in report if r.kind == "compile"]
    assert [r.cache for r in compiles] == ["miss", "hit"]
    assert [r.kind for r in report] == ["compile", "load", "compile", "load"]
    table = report.table()
    assert "compile (miss)" in table and "compile (hit)" in table
    records = json.loads(report.to_json())["records"]
    assert [r.get("cache") for r in records] == ["miss", None, "hit", None]


def test_without_cache_options_nothing_changes(context, tmp_path):
    compiled = context.compile(add, _sample(), storage.path(tmp_path / "out"))
    assert compiled.cache_status == "off"
    assert [r.kind for r in context.report()] == ["load"]


def test_host_reference_uses_the_cache_too(tmp_path):
    with Context(MNDevice("pfvm:cpu")) as ctx:
        sample = _sample()
        assert _compile(ctx, tmp_path, sample=sample).cache_status == "miss"
        again = _compile(ctx, tmp_path, sample=sample)
        assert again.cache_status == "hit"
        assert torch.allclose(again(sample)["out"].cpu(), sample["x"] + sample["y"])


_SCRIPT = """
import sys, torch
from mlsdk import CacheOptions, Context, MNDevice, storage
lin = torch.nn.Linear(16, 16)
torch.nn.init.constant_(lin.weight, 0.5)
torch.nn.init.constant_(lin.bias, 0.25)
def f(d):
    return {"y": lin(d["x"])}
ctx = Context(MNDevice("mncore2:auto"))
c = ctx.compile(f, {"x": torch.ones(4, 16)}, storage.path(sys.argv[1]) / sys.argv[2],
                cache_options=CacheOptions(storage.path(sys.argv[1]) / "cache"))
y = c({"x": torch.ones(4, 16)})["y"].cpu()
assert torch.allclose(y, torch.full((4, 16), 8.25)), y
print(c.cache_status)
"""


def test_another_process_hits(tmp_path):
    script = tmp_path / "compile.py"
    script.write_text(_SCRIPT)
    statuses = []
    for out in ("a", "b"):
        run = subprocess.run([sys.executable, str(script), str(tmp_path), out], env=ENV,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        statuses.append(run.stdout.split()[-1])
    assert statuses == ["miss", "hit"]


# -- the key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["shape", "dtype", "option", "name"])
def test_any_change_of_key_is_a_miss(context, tmp_path, change):
    assert _compile(context, tmp_path).cache_status == "miss"
    if change == "shape":
        second = _compile(context, tmp_path, sample=_sample((8, 32)))
    elif change == "dtype":
        second = _compile(context, tmp_path, sample=_sample(dtype=torch.float16))
    elif change == "option":
        second = _compile(context, tmp_path, options={"float_dtype": "bfloat16"})
    else:
        second = _compile(context, tmp_path, fn=lambda d: add(d))
    assert second.cache_status == "miss"
    assert len(_entries(tmp_path / "cache")) == 2


def test_a_strict_option_is_part_of_the_key(context, tmp_path):
    _compile(context, tmp_path)
    assert _compile(context, tmp_path, options={"strict": True}).cache_status == "miss"
    assert _compile(context, tmp_path, options={"strict": True}).cache_status == "hit"


def test_a_constraint_is_part_of_the_key(context, tmp_path):
    sample = {"x": torch.randn(32, 64)}
    consumer = context.compile(inc, {"y": sample["x"]}, storage.path(tmp_path / "consumer"))
    wanted = consumer.input_specs["y"]
    plain = _compile(context, tmp_path, fn=double, sample=sample)
    constrained = _compile(context, tmp_path, fn=double, sample=sample,
                           io_spec_constraints={"y": wanted})
    assert (plain.cache_status, constrained.cache_status) == ("miss", "miss")
    assert constrained.output_specs["y"].is_memcopyable_to(wanted)
    again = _compile(context, tmp_path, fn=double, sample=sample,
                     io_spec_constraints={"y": wanted})
    assert again.cache_status == "hit"
    assert again.output_specs["y"].is_memcopyable_to(wanted)


def test_a_constant_value_is_part_of_the_key(context, tmp_path):
    lin = torch.nn.Linear(16, 8)

    def f(d):
        return {"y": lin(d["x"])}

    sample = {"x": torch.randn(4, 16)}
    assert _compile(context, tmp_path, fn=f, sample=sample).cache_status == "miss"
    assert _compile(context, tmp_path, fn=f, sample=sample).cache_status == "hit"
    with torch.no_grad():
        lin.weight[0, 0] += 1.0
    changed = _compile(context, tmp_path, fn=f, sample=sample)
    assert changed.cache_status == "miss"
    assert torch.allclose(changed(sample)["y"].cpu(), lin(sample["x"]).detach(), atol=1e-5)


def test_the_key_covers_arch_options_constraints_and_kit(monkeypatch):
    captured = Captured(capture(add, _sample()))
    base = CompileRequest(name="add")
    key = cache_key(captured, base)
    assert key == cache_key(Captured(capture(add, _sample())), base)  # other values, same shapes
    other_arch = MNCORE2.replace(clock_mhz=MNCORE2.clock_mhz * 2)
    assert cache_key(captured, replace(base, config=other_arch)) != key
    assert cache_key(captured, replace(base, options={"strict": True})) != key
    assert cache_key(captured, replace(base, options={"float_dtype": "float16"})) != key
    assert cache_key(captured, replace(base, name="other")) != key
    layout = host_layout((8, 16), "float32")
    assert cache_key(captured, replace(base, constraints={"x": layout})) != key
    assert cache_key(captured, replace(base, constraints={"out": "x"})) != key
    # Which tensors are registered is not hashed (ids change from run to run): the captured
    # state is.
    assert cache_key(captured, replace(base, registered={1: "m.w"})) == key
    assert cache_key(replace(captured, state={"c": "m.w"}), base) != key
    kit = kit_version()
    assert set(kit) == {"mlsdk", "program", "sources"} and len(kit["sources"]) == 64
    monkeypatch.setattr("mlsdk.cache.kit_version", lambda: {**kit, "sources": "0" * 64})
    assert cache_key(captured, base) != key


# -- bad entries --------------------------------------------------------------------------------


def _only_entry(tmp_path) -> Path:
    (entry,) = _entries(tmp_path / "cache")
    return entry


@pytest.mark.parametrize("damage", ["truncate-program", "garbage-program", "truncate-constant",
                                    "garbage-entry-json", "no-entry-json", "file-not-dir"])
def test_a_corrupt_entry_is_ignored_with_a_warning_and_rebuilt(context, tmp_path, damage):
    lin = torch.nn.Linear(16, 8)

    def f(d):
        return {"y": lin(d["x"])}

    sample = {"x": torch.randn(4, 16)}
    _compile(context, tmp_path, fn=f, sample=sample)
    entry = _only_entry(tmp_path)
    if damage == "truncate-program":
        data = (entry / "program.json").read_bytes()
        (entry / "program.json").write_bytes(data[: len(data) // 2])
    elif damage == "garbage-program":
        (entry / "program.json").write_bytes(os.urandom(300))
    elif damage == "truncate-constant":
        constant = sorted((entry / "constants").iterdir())[0]
        constant.write_bytes(constant.read_bytes()[:100])
    elif damage == "garbage-entry-json":
        (entry / "entry.json").write_text("{not json")
    elif damage == "no-entry-json":
        (entry / "entry.json").unlink()
    else:
        import shutil

        shutil.rmtree(entry)
        entry.write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="Ignoring compile cache entry"):
        rebuilt = _compile(context, tmp_path, fn=f, sample=sample)
    assert rebuilt.cache_status == "miss"
    assert torch.allclose(rebuilt(sample)["y"].cpu(), lin(sample["x"]).detach(), atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile(context, tmp_path, fn=f, sample=sample).cache_status == "hit"
    assert _only_entry(tmp_path) == entry and entry.is_dir()
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".tmp-")]


def test_a_foreign_entry_is_ignored(context, tmp_path):
    _compile(context, tmp_path)
    _compile(context, tmp_path, fn=double, sample={"x": torch.randn(8, 16)})
    first, second = _entries(tmp_path / "cache")
    # Put one function's entry under the other's key, as a careless copy would.
    import shutil

    shutil.rmtree(second)
    shutil.copytree(first, second)
    with pytest.warns(CacheWarning, match="another key"):
        _compile(context, tmp_path)
        _compile(context, tmp_path, fn=double, sample={"x": torch.randn(8, 16)})


# -- concurrent writers -------------------------------------------------------------------------


def test_concurrent_threads_leave_one_whole_entry(tmp_path):
    results: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)
    options = CacheOptions(tmp_path / "cache")

    def work(index: int) -> None:
        try:
            barrier.wait()
            program, result = _compile_program(add, _sample(), tmp_path / f"out{index}", options)
            results.append(result.status)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert set(results) <= {"hit", "miss"} and "miss" in results
    assert len(list((tmp_path / "cache").iterdir())) == 1  # no temporaries left
    _, again = _compile_program(add, _sample(), tmp_path / "again", options)
    assert again.status == "hit"


@pytest.mark.parametrize("start", ["empty", "bad entry"])
def test_writers_racing_on_one_key_leave_one_whole_entry(tmp_path, start):
    program, first = _compile_program(add, _sample(), tmp_path / "a",
                                     CacheOptions(tmp_path / "first"))
    store = CacheDir.open(tmp_path / "cache")
    key = first.key
    if start == "bad entry":
        (store.entry(key)).mkdir()
        (store.entry(key) / "program.json").write_text("{")
    barrier = threading.Barrier(6)
    stored: list[bool] = []

    def write() -> None:
        barrier.wait()
        stored.append(store.store(key, program, "add", MNCORE2, {}))

    threads = [threading.Thread(target=write) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stored == [True] * 6
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [key]
    assert store.lookup(key, "add", MNCORE2) is not None


def test_a_writer_that_loses_the_race_keeps_the_winners_entry(tmp_path):
    store = CacheDir.open(tmp_path / "cache")
    graph_program, first = _compile_program(add, _sample(), tmp_path / "a",
                                           CacheOptions(tmp_path / "cache"))
    before = (first.entry / "entry.json").read_text()
    assert store.store(first.key, graph_program, "add", MNCORE2, {})  # as a second writer would
    assert (first.entry / "entry.json").read_text() == before
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.key]


def test_concurrent_processes_leave_one_whole_entry(tmp_path):
    script = tmp_path / "compile.py"
    script.write_text(_SCRIPT)
    runs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), f"out{i}"], env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
        assert out.split()[-1] in ("hit", "miss")
    assert len(list((tmp_path / "cache").iterdir())) == 1


# -- bad options --------------------------------------------------------------------------------


def test_an_unwritable_cache_directory_is_a_clear_error(context, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    before = len(context.report())
    with pytest.raises(CacheError, match="Cannot create the compile cache directory.*cache_opt"):
        _compile(context, tmp_path, cache_options=CacheOptions(blocker / "cache"))
    assert len(context.report()) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs POSIX permissions enforced (not root)")
def test_a_read_only_cache_directory_is_a_clear_error(context, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o500)
    try:
        with pytest.raises(CacheError, match="is not writable"):
            _compile(context, tmp_path)
    finally:
        cache.chmod(0o700)


def test_disabling_the_app_or_codegen_cache_turns_it_off(context, tmp_path):
    for flags in ({"enable_app_cache": False}, {"enable_codegen_cache": False}):
        compiled = _compile(context, tmp_path,
                            cache_options=CacheOptions(tmp_path / "cache", **flags))
        assert compiled.cache_status == "off"
    assert not (tmp_path / "cache").exists()
    assert [r.cache for r in context.report() if r.kind == "compile"] == ["off", "off"]


def test_the_onnx_and_gpfn2obj_flags_have_no_stage_here(context, tmp_path):
    options = CacheOptions(tmp_path / "cache", enable_onnx_cache=False,
                           enable_gpfn2obj_cache=False)
    assert _compile(context, tmp_path, cache_options=options).cache_status == "miss"
    assert _compile(context, tmp_path, cache_options=options).cache_status == "hit"


def test_bad_cache_options_are_clear_errors(context, tmp_path):
    with pytest.raises(TypeError, match="enable_app_cache must be a bool, not 'yes'"):
        CacheOptions(tmp_path, enable_app_cache="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="path must be a non-empty str or path-like"):
        CacheOptions("")
    with pytest.raises(TypeError, match="path must be a non-empty str or path-like"):
        CacheOptions(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache_options must be a CacheOptions.*not str"):
        _compile(context, tmp_path, cache_options=str(tmp_path))
    assert len(context.report()) == 0
    assert CacheOptions(storage.path(tmp_path) / "c").root == tmp_path / "c"


# -- the example --------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_example_misses_then_hits(tmp_path, device):
    statuses = []
    for _ in range(2):
        run = run_example("compile_cache.py", device, str(tmp_path), cwd=tmp_path)
        lines = run.stdout.splitlines()
        assert lines[-1] == "compile_cache: success"
        statuses.append(lines[0])
        assert f"cache {lines[0].split()[-1]}" in run.stderr  # the mlsdk.cache log
    assert statuses == ["compile cache: miss", "compile cache: hit"]


@pytest.mark.parametrize("cached", [False, True])
def test_compiling_runs_torch_on_one_thread_and_restores_the_count(tmp_path, cached):
    seen = []

    def probe(inputs):
        seen.append(torch.get_num_threads())
        return {"out": inputs["x"] * 2}

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        options = CacheOptions(tmp_path / "cache") if cached else None
        _compile_program(probe, _sample(), tmp_path / "out", options)
        assert seen == [1] and torch.get_num_threads() == 2
        with pytest.raises(Exception, match="must return"):
            _compile_program(lambda d: 3, _sample(), tmp_path / "bad", options)
        assert torch.get_num_threads() == 2  # restored after an error too
    finally:
        torch.set_num_threads(before)
