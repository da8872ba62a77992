"""storage.path: joins with ``/``, works as a path-like; codegen directories reload elsewhere."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mlsdk import CodegenError, storage
from mlsdk.storage import StoragePath
from mlsdk.testing.examples import run_example
from mncore_hdl.paths import repo_root

ROOT = repo_root()
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("sdk", "compiler",
                                                                           "hdl"))}


def test_slash_joins_and_returns_a_storage_path(tmp_path):
    out = storage.path(tmp_path)
    joined = out / "train_step"
    assert isinstance(joined, StoragePath)
    assert joined.path == tmp_path / "train_step"
    assert (out / pathlib.Path("a") / "b").path == tmp_path / "a" / "b"
    assert out.joinpath("a", storage.path("b")).path == tmp_path / "a" / "b"
    assert joined.name == "train_step" and joined.parent == out
    assert repr(joined) == f"StoragePath({str(tmp_path / 'train_step')!r})"
    assert storage.path(joined) is joined
    assert storage.path("~/x").path == Path.home() / "x"


def test_it_is_a_path_like_that_open_path_and_torch_save_accept(tmp_path):
    out = storage.path(tmp_path)
    assert isinstance(out, os.PathLike)
    assert os.fspath(out / "f") == str(tmp_path / "f")
    with open(out / "notes.txt", "w") as handle:
        handle.write("hello")
    assert Path(out / "notes.txt").read_text() == "hello"
    assert (out / "notes.txt").exists() and not (out / "missing").exists()
    state = {"w": torch.arange(6.0).reshape(2, 3)}
    torch.save(state, out / "state.pt")
    assert torch.equal(torch.load(out / "state.pt")["w"], state["w"])


def test_bad_joins_and_paths_are_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="joins with a str or path-like name, not int"):
        storage.path(tmp_path) / 3  # type: ignore[operator]
    with pytest.raises(TypeError, match="non-empty path string"):
        storage.path("")
    with pytest.raises(TypeError, match="non-empty path string"):
        storage.path(None)  # type: ignore[arg-type]


# -- codegen directories ------------------------------------------------------------------------


def test_compile_into_a_joined_path_and_load_codegen_dir(context, tmp_path):
    sample = {"x": torch.randn(8, 16)}
    compiled = context.compile(lambda d: {"y": d["x"] * 3}, sample,
                               storage.path(tmp_path) / "triple")
    assert (tmp_path / "triple" / "program.json").is_file()
    loaded = context.load_codegen_dir(storage.path(tmp_path) / "triple")
    assert loaded.input_specs == compiled.input_specs
    assert loaded.output_specs == compiled.output_specs
    assert torch.allclose(loaded(sample)["y"].cpu(), sample["x"] * 3)


def test_load_codegen_dir_keeps_the_compiled_strictness(context, tmp_path):
    def f(d):
        return {"y": d["x"] + 1}

    context.compile(f, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "s"),
                    options={"strict": True})
    assert context.load_codegen_dir(storage.path(tmp_path / "s")).strict is True
    assert context.load_codegen_dir(storage.path(tmp_path / "s"), strict=False).strict is False


def test_load_codegen_dir_bad_inputs(context, tmp_path):
    with pytest.raises(TypeError, match=r"storage.path\(...\), not str"):
        context.load_codegen_dir(str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(CodegenError, match="does not exist"):
        context.load_codegen_dir(storage.path(tmp_path / "nothing"))
    assert len(context.report()) == 0


_COMPILE = """
import json, sys, torch
from mlsdk import Context, MNDevice, storage
def scale_add(d):
    return {"out": d["x"] * 2 + d["y"]}
ctx = Context(MNDevice(sys.argv[2]))
c = ctx.compile(scale_add, {"x": torch.ones(16, 32), "y": torch.ones(16, 32)},
                storage.path(sys.argv[1]) / "scale_add")
print(json.dumps({"in": {k: v.to_dict() for k, v in c.input_specs.items()},
                  "out": {k: v.to_dict() for k, v in c.output_specs.items()}}))
"""

_LOAD = """
import json, sys, torch
from mlsdk import Context, MNDevice, storage
ctx = Context(MNDevice(sys.argv[2]))
c = ctx.load_codegen_dir(storage.path(sys.argv[1]) / "scale_add")
x = torch.arange(512.0).reshape(16, 32)
out = c({"x": x, "y": torch.ones(16, 32)})["out"].cpu()
assert torch.equal(out, x * 2 + 1), out
print(json.dumps({"in": {k: v.to_dict() for k, v in c.input_specs.items()},
                  "out": {k: v.to_dict() for k, v in c.output_specs.items()}}))
"""


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_load_codegen_dir_in_another_process(tmp_path, device):
    specs = []
    for name, code in (("compile.py", _COMPILE), ("load.py", _LOAD)):
        script = tmp_path / name
        script.write_text(code)
        run = subprocess.run([sys.executable, str(script), str(tmp_path), device], env=ENV,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        specs.append(json.loads(run.stdout.splitlines()[-1]))
    assert specs[0] == specs[1]
    assert set(specs[1]["in"]) == {"x", "y"} and set(specs[1]["out"]) == {"out"}


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_example_reloads_in_a_second_process(tmp_path, device):
    run = run_example("load_codegen_dir.py", device, cwd=tmp_path,
                      env={"TMPDIR": str(tmp_path)})  # its codegen dir goes there
    lines = run.stdout.splitlines()
    assert lines[-1] == "load_codegen_dir: success"
    assert str(tmp_path) in lines[0]
    assert any("same input_specs and output_specs" in line for line in lines)
