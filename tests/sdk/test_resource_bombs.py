"""Resource bombs in loaded programs: huge graphs, files, shapes and extents are refused with a
CodegenError in bounded time and memory (issue 38, items 2 and 3)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from mlsdk import CodegenError, storage
from mncore_compiler.program import DeviceProgram, body_checksum
from mncore_compiler.program_check import MAX_GRAPH_NODES

WEIGHT = torch.linspace(-1.0, 1.0, 16)


def model(inputs):
    return {"y": (inputs["x"] * WEIGHT).sum(0)}


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory) -> Path:
    from mlsdk import Context, MNDevice

    root = tmp_path_factory.mktemp("bombs") / "program"
    context = Context(MNDevice("mncore2:auto"))
    try:
        context.compile(model, {"x": torch.randn(4, 16)}, storage.path(root))
    finally:
        context.close()
    return root


def _forge(source: Path, target: Path, edit) -> Path:
    shutil.copytree(source, target)
    body = json.loads((target / "program.json").read_text())
    body.pop("sha256")
    edit(body)
    body["sha256"] = body_checksum(body)
    (target / "program.json").write_text(json.dumps(body))
    return target


def test_a_graph_of_200k_nodes_is_refused_quickly(program_dir, tmp_path):
    node = {"name": "r", "op": "relu", "operands": ["x"], "attrs": {},
            "type": {"shape": [4, 16], "dtype": "float32"}}

    def grow(body):
        body["graph"]["nodes"] = [node] * 200_000  # the count is refused before the names
    target = _forge(program_dir, tmp_path / "big", grow)
    t0 = time.perf_counter()
    with pytest.raises(CodegenError, match=rf"200000 nodes, more than {MAX_GRAPH_NODES}"):
        DeviceProgram.load(target)
    # the JSON itself is what a load must parse; nothing past it
    assert time.perf_counter() - t0 < 30


def test_a_program_json_past_the_limit_is_refused_unread(program_dir, tmp_path, monkeypatch):
    import mncore_compiler.program as program

    monkeypatch.setattr(program, "MAX_PROGRAM_BYTES", 4096)
    target = _forge(program_dir, tmp_path / "padded",
                    lambda body: body["options"].update(pad="x" * 10000))
    with pytest.raises(CodegenError, match="larger than 4096 bytes"):
        DeviceProgram.load(target)


def _declare_input(body, shape: list[int], layout: str) -> None:
    entry = body["inputs"][0]
    entry.update(shape=shape, layout=layout)
    body["graph"]["inputs"][0]["shape"] = shape


@pytest.mark.parametrize("shape, layout", [
    ([2 ** 31], "(2147483648)/((1073741824:1, 2_W:1))"),
    ([2 ** 32, 2 ** 32], "(4294967296,4294967296)/((4294967296:4294967296), "
                         "(2147483648:1, 2_W:1))"),
])
def test_declared_shapes_past_the_chip_are_codegen_errors(program_dir, tmp_path, shape, layout):
    target = _forge(program_dir, tmp_path / "wide", lambda b: _declare_input(b, shape, layout))
    t0 = time.perf_counter()
    with pytest.raises(CodegenError, match="inconsistent|DRAM|corrupt"):
        DeviceProgram.load(target)
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("extent", [2 ** 64, 2 ** 70, -1])
def test_an_extent_past_64_bits_in_an_io_table_names_the_field(program_dir, tmp_path, extent):
    target = _forge(program_dir, tmp_path / "ext",
                    lambda b: b["inputs"][0].update(shape=[extent, 16]))
    with pytest.raises(CodegenError, match=r"inputs\[0\]"):
        DeviceProgram.load(target)
