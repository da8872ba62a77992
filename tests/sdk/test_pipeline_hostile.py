"""Hostile pipelines: planted folders and plan files, names that escape the codegen directory,
plans that lie, and problems too large to negotiate (issue 38, items 2 and 3)."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from mlsdk import CodegenError, storage
from mlsdk.pipeline import PLAN_FILE, Edge, Pipeline, Port, Problem, load_plan
from mlsdk.pipeline.negotiate import MAX_COMPONENT_PORTS, negotiate
from mlsdk.pipeline.planner import MAX_PIPELINE_FUNCTIONS
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout, native_layout
from pipeline_fns import first, second

X = torch.randn(8, 8)


def _chain(context) -> Pipeline:
    pipe = Pipeline(context)
    pipe.add("f1", first, {"x": X})
    pipe.add("f2", second, {"a": X, "w": X})
    pipe.connect("f1.a", "f2.a")
    return pipe


def test_a_planted_probes_symlink_is_never_written_through(context, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "pipe"
    out.mkdir()
    (out / "probes").symlink_to(outside)
    _chain(context).compile(storage.path(out))
    assert list(outside.iterdir()) == []
    # and the compile's own probes are gone: only the functions, the plan and the plant
    assert sorted(p.name for p in out.iterdir()) == ["f1", "f2", PLAN_FILE, "probes"]


def test_a_planted_plan_symlink_is_replaced_not_followed(context, tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me\n")
    out = tmp_path / "pipe"
    out.mkdir()
    (out / PLAN_FILE).symlink_to(target)
    compiled = _chain(context).compile(storage.path(out))
    assert target.read_text() == "keep me\n"
    assert not (out / PLAN_FILE).is_symlink()
    assert load_plan(out / PLAN_FILE) == compiled.plan


@pytest.mark.parametrize("name", ["/tmp/elsewhere", "a/b", "x\\y", "nul\0", "x" * 200])
def test_a_function_name_that_is_not_one_folder_is_refused(context, name):
    with pytest.raises(ValueError, match="names the folder"):
        Pipeline(context).add(name, first, {"x": X})


def test_more_functions_than_the_limit_are_refused_before_any_compile(context):
    pipe = Pipeline(context)
    added = 0
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="MAX_PIPELINE_FUNCTIONS"):
        for index in range(1000):
            pipe.add(f"f{index}", first, {"x": X})
            added += 1
    assert time.perf_counter() - t0 < 5
    assert added == MAX_PIPELINE_FUNCTIONS


def _program(inputs: dict, outputs: dict) -> SimpleNamespace:
    """What negotiation reads of a DeviceProgram, for a problem too large to compile."""
    return SimpleNamespace(layouts=inputs, output_layouts=outputs, inputs=tuple(inputs),
                           outputs=tuple(outputs), constants=(), flops=0,
                           launch_outputs=tuple(outputs))


def _fan_out(consumers: int) -> Problem:
    """One producer feeding ``consumers`` functions, each preferring another layout."""
    shape = (8, 64)
    rows, tiles = host_layout(shape, "float32"), native_layout(shape, "float32")
    programs = {"p": _program({}, {"y": tiles})}
    edges = []
    for index in range(consumers):
        layout = rows if index % 2 else tiles
        programs[f"c{index}"] = _program({"x": layout}, {})
        edges.append(Edge(Port("p", "y", True), Port(f"c{index}", "x", False)))
    return Problem(MNCORE2, programs, {name: 1 for name in programs}, edges)


def test_negotiating_a_thousand_way_fan_out_is_refused_quickly():
    outcome: list[BaseException] = []

    def run():
        try:
            negotiate(_fan_out(1000))
        except BaseException as exc:  # noqa: BLE001 - the test reports what came out
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "negotiation of 1001 joined IOs did not finish in 20 s"
    assert outcome and isinstance(outcome[0], ValueError)
    assert "MAX_COMPONENT_PORTS" in str(outcome[0])


def test_a_fan_out_within_the_limit_still_negotiates():
    best, alternatives = negotiate(_fan_out(MAX_COMPONENT_PORTS // 4))
    assert best.cycles > 0 and len(alternatives) == MAX_COMPONENT_PORTS // 4


# -- the plan file --------------------------------------------------------------------------


@pytest.mark.parametrize("text, match", [
    ("", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"functions": {}, "edges": [{"edge": "a.b -> c.d"}], "totals": {}}', "has no 'count'|"
     "names function"),
    ("[" * 100000, "not valid JSON"),
])
def test_a_broken_plan_file_is_a_codegen_error(tmp_path, text, match):
    path = tmp_path / PLAN_FILE
    path.write_text(text)
    with pytest.raises(CodegenError, match=match):
        load_plan(path)


def test_a_dangling_edge_in_a_plan_names_the_missing_function(context, tmp_path):
    compiled = _chain(context).compile(storage.path(tmp_path / "pipe"))
    plan = json.loads(json.dumps(compiled.plan))
    del plan["functions"]["f1"]
    path = tmp_path / "pipe" / PLAN_FILE
    path.write_text(json.dumps(plan))
    with pytest.raises(CodegenError, match=r"edges\[0\] \(f1.a -> f2.a\) names function 'f1'"):
        load_plan(path)


def test_a_huge_plan_file_is_refused_without_reading_it(tmp_path, monkeypatch):
    import mlsdk.pipeline.planfile as planfile

    monkeypatch.setattr(planfile, "MAX_PLAN_BYTES", 1000)
    path = tmp_path / PLAN_FILE
    with open(path, "wb") as handle:
        handle.truncate(10 << 20)
    with pytest.raises(CodegenError, match="larger than 1000 bytes"):
        load_plan(path)
    assert os.path.getsize(path) == 10 << 20
