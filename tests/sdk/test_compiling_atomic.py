"""Codegen directories replaced whole, never written through a symlink, and bounded by the
chip's DRAM (issue 22, items 4, 6 and 7). ``bench/codegen_hammer.py`` runs the long version."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import resource
import signal
from pathlib import Path

import pytest
import torch
from mlsdk import CodegenError, Context, storage
from mlsdk.testing.codegen import killed_saves
from mncore_compiler.program import DeviceProgram, body_checksum

SEED = 22
WEIGHTS = {"a": torch.linspace(-1.0, 1.0, 256), "b": torch.linspace(2.0, 3.0, 256)}


def _program(context: Context, tmp_path: Path, which: str) -> DeviceProgram:
    weight = WEIGHTS[which]

    def scale(inputs):
        return {"out": inputs["x"] * weight}

    out = storage.path(tmp_path) / f"build-{which}"
    context.compile(scale, {"x": torch.randn(4, 256)}, out)
    return DeviceProgram.load(out.path)


def _which(program: DeviceProgram) -> str:
    (constant,) = program.graph.constants.values()
    matches = [k for k, w in WEIGHTS.items() if torch.equal(constant, w)]
    assert len(matches) == 1, "a program mixing two saves"
    return matches[0]


def _recompile(programs: dict[str, DeviceProgram], directory: Path, count: int) -> None:
    for i in range(count):
        programs["ab"[i % 2]].save(directory)


@pytest.fixture()
def programs(context, tmp_path):
    return {which: _program(context, tmp_path, which) for which in WEIGHTS}


def test_a_reader_during_recompiles_sees_only_whole_programs(programs, tmp_path):
    target = tmp_path / "shared"
    programs["a"].save(target)
    writer = multiprocessing.get_context("fork").Process(
        target=_recompile, args=(programs, target, 300))
    writer.start()
    seen = {"a": 0, "b": 0}
    try:
        while writer.is_alive():
            seen[_which(DeviceProgram.load(target))] += 1
    finally:
        writer.join()
    assert writer.exitcode == 0
    assert seen["a"] + seen["b"] > 10, f"the reader barely ran: {seen}"
    assert sorted(p.name for p in (target / "constants").iterdir()) == [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}.npy"
        for p in sorted((target / "constants").iterdir())]
    assert len(list((target / "constants").iterdir())) <= 2  # the last program and the previous


def test_a_kill_during_a_save_never_loses_the_previous_program(programs, tmp_path):
    target = tmp_path / "victim"
    for round_ in killed_saves([programs["a"], programs["b"]], target, 12, SEED):
        assert _which(DeviceProgram.load(target)) in WEIGHTS, f"seed {SEED}, round {round_}"
    programs["a"].save(target)  # the killed writers' temporaries are swept by the next save
    left = [p for p in target.rglob("*") if p.name.endswith(".tmp")]
    assert not left, f"temporaries left behind: {left}"


def test_a_symlinked_constants_directory_is_never_written_through(context, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "constants").symlink_to(outside)
    weight = WEIGHTS["a"]

    def scale(inputs):
        return {"out": inputs["x"] * weight}

    with pytest.raises(CodegenError, match="constants.*not a plain directory"):
        context.compile(scale, {"x": torch.randn(4, 256)}, storage.path(target))
    assert list(outside.iterdir()) == []


def _forge(directory: Path, edit) -> None:
    path = directory / "program.json"
    body = json.loads(path.read_text())
    body.pop("sha256")
    edit(body)
    body["sha256"] = body_checksum(body)
    path.write_text(json.dumps(body))


def test_a_program_larger_than_the_chip_is_refused_at_load(context, tmp_path):
    def spread(inputs):
        return {"out": inputs["x"].expand(64, 1024).sum()}

    out = storage.path(tmp_path) / "big"
    context.compile(spread, {"x": torch.randn(1)}, out)
    huge = [1 << 20, 1 << 14]  # 16 GiB of float32, from a 4-byte input

    def grow(body):
        node = body["graph"]["nodes"][0]
        node["attrs"]["shape"] = huge
        node["type"]["shape"] = huge
    _forge(out.path, grow)
    with pytest.raises(CodegenError, match="value %expand .* the chip's DRAM holds"):
        context.load_codegen_dir(out)


def test_load_codegen_dir_of_a_normal_program_still_works(context, programs, tmp_path):
    programs["b"].save(tmp_path / "again")
    assert _which(DeviceProgram.load(tmp_path / "again")) == "b"


def double(inputs):
    return {"y": inputs["x"] * 2}


def test_a_write_failing_half_way_leaves_the_old_program_whole(context, tmp_path):
    """A file-size limit makes the OS fail the write part-way, as a full disk would."""
    out = tmp_path / "prog"
    context.compile(double, {"x": torch.ones(4, 4)}, storage.path(out))
    before = (out / "program.json").read_bytes()
    assert len(before) > 600

    def bigger(inputs):
        return {"y": (inputs["x"] * 3 + 1).relu() - inputs["x"]}

    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, limits[1]))
    try:
        with pytest.raises(CodegenError, match="Cannot write the codegen directory"):
            context.compile(bigger, {"x": torch.ones(4, 4)}, storage.path(out))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert (out / "program.json").read_bytes() == before
    assert json.loads(before)["name"] == "double"
    reloaded = context.load_codegen_dir(storage.path(out))
    assert reloaded({"x": torch.ones(4, 4)})["y"].cpu().eq(2).all()
    assert not [p for p in out.rglob("*.tmp")], "temporary files left behind"
