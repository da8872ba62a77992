"""Bounded fuzzing of every artifact and option parser: each failure is the package's own error
(issue 22, items 8, 9 and 13). Derandomised: every run draws the same cases."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlsdk import CacheOptions, CacheWarning, CodegenError, Context, IOSpec, MNDevice, storage
from mlsdk.cachedir import CacheDir
from mlsdk.compiling import compile_to_directory
from mlsdk.options import read_option_json
from mlsdk.settings import TOOLS
from mncore_compiler.driver import CompileRequest, function_name
from mncore_compiler.program import DeviceProgram, body_checksum
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import Layout, LayoutError

#: ``MNCORE_FUZZ_EXAMPLES=5000`` for a long run; the default keeps each test to about a second.
FUZZ = settings(max_examples=TOOLS["MNCORE_FUZZ_EXAMPLES"].get(),
                deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
WEIGHT = torch.linspace(-1.0, 1.0, 16)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70)
    | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)

def _compile_program(fn, sample, where, cache_options):
    """``mlsdk.compiling.compile_to_directory`` with the default request: (program, CacheResult)."""
    result = compile_to_directory(fn, sample, where, CompileRequest(name=function_name(fn)),
                             cache_options)
    return result.program, result.cache



def model(inputs):
    h = torch.relu(inputs["x"] * WEIGHT).permute(1, 0)
    return {"y": h.sum(0), "z": inputs["x"] + 1}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, Any], str]:
    """A codegen directory, its program.json, and the key of a cache entry beside it."""
    root = tmp_path_factory.mktemp("fuzz")
    context = Context(MNDevice("mncore2:auto"))
    try:
        context.compile(model, {"x": torch.randn(4, 16)}, storage.path(root) / "out",
                        cache_options=CacheOptions(root / "cache"))
    finally:
        context.close()
    (key,) = [p.name for p in (root / "cache").iterdir() if not p.name.startswith(".")]
    return root, json.loads((root / "out" / "program.json").read_text()), key


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _mutate(body: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    body.pop("sha256")
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from([p for p in _paths(body) if p]))
        parent: Any = body
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = data.draw(json_values)
    body["sha256"] = body_checksum(body)  # as a forger would
    return body


@FUZZ
@given(data=st.data())
def test_mutated_program_json_loads_or_raises_codegen_error(built, data):
    root, body, _ = built
    target = root / "mutant"
    if not target.exists():
        shutil.copytree(root / "out", target)
    (target / "program.json").write_text(json.dumps(_mutate(body, data)))
    try:
        DeviceProgram.load(target)
    except CodegenError:
        pass


@FUZZ
@given(value=json_values)
def test_any_entry_json_is_a_hit_or_a_warned_miss(built, value):
    root, _, key = built
    entry = root / "cache" / key
    original = (entry / "entry.json").read_text()
    try:
        (entry / "entry.json").write_text(json.dumps(value))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CacheWarning)
            assert CacheDir(root / "cache").lookup(key, "model", MNCORE2) is None
    finally:
        (entry / "entry.json").write_text(original)


def test_the_fuzzed_entry_still_hits(built):
    root, _, key = built
    program, result = _compile_program(model, {"x": torch.randn(4, 16)}, root / "again",
                                      CacheOptions(root / "cache"))
    assert (result.status, result.key) == ("hit", key)


@FUZZ
@given(value=json_values | st.text(max_size=40))
def test_option_files_raise_value_or_type_errors(built, value):
    path = built[0] / "opts.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    try:
        read_option_json(path)
    except ValueError:
        pass


@FUZZ
@given(data=st.dictionaries(st.sampled_from(["name", "shape", "dtype", "layout", "location",
                                              "nbytes"]), json_values, max_size=6))
def test_iospec_dicts_raise_value_or_type_errors(data):
    try:
        IOSpec.from_dict(data)
    except (ValueError, TypeError):
        pass


layout_text = st.text(alphabet="()/,:_0123456789GWHAL -", max_size=40) | st.builds(
    lambda dims, big: f"({','.join(map(str, dims))})/("
                      + ", ".join(f"({d}:{big})" for d in dims) + ")",
    st.lists(st.integers(1, 2 ** 70), min_size=1, max_size=3), st.integers(0, 2 ** 70))


@FUZZ
@given(text=layout_text, dtype=st.sampled_from(["float32", "float16", "bfloat16", "int32"]))
def test_layout_strings_raise_layout_errors(text, dtype):
    try:
        layout = Layout.parse(text, dtype)
    except LayoutError:
        return
    assert layout.nbytes >= 0
