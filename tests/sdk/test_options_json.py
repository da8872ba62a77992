"""compile(options={"option_json": path}): a JSON file of options, merged under the dict."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from mlsdk import COMPILE_OPTIONS, Context, MNDevice, storage
from mlsdk.options import read_option_json, resolve_compile_options
from mlsdk.testing.examples import run_example


def double(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"y": inputs["x"] @ inputs["x"]}


X = {"x": torch.eye(4)}


def write(tmp_path: Path, content: object, name: str = "options.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_file_options_apply(context, tmp_path):
    path = write(tmp_path, {"float_dtype": "mixed", "strict": True})
    f = context.compile(double, X, storage.path(tmp_path / "f"), options={"option_json": path})
    assert f.strict is True
    assert "mixed_matmul" in [n.op for n in f.program.graph.nodes]
    # The program records the effective options, not the file name.
    assert f.program.options == {"float_dtype": "mixed", "strict": True}
    torch.testing.assert_close(f(X)["y"].cpu(), torch.eye(4))


def test_dict_keys_override_the_file(context, tmp_path):
    path = write(tmp_path, {"float_dtype": "mixed", "strict": True})
    f = context.compile(double, X, storage.path(tmp_path / "f"),
                        options={"option_json": str(path), "float_dtype": "float32"})
    assert f.strict is True
    assert "mixed_matmul" not in [n.op for n in f.program.graph.nodes]
    assert f.program.options == {"float_dtype": "float32", "strict": True}


@pytest.mark.parametrize("kind", [str, Path, storage.path])
def test_path_kinds(tmp_path, kind):
    path = write(tmp_path, {"strict": True})
    assert resolve_compile_options({"option_json": kind(path)}, COMPILE_OPTIONS) == {
        "strict": True}


def test_resolution_leaves_the_callers_dict_alone(tmp_path):
    path = write(tmp_path, {"strict": True})
    given = {"option_json": str(path)}
    resolve_compile_options(given, COMPILE_OPTIONS)
    assert given == {"option_json": str(path)}
    assert resolve_compile_options(None, COMPILE_OPTIONS) == {}
    assert resolve_compile_options({}, COMPILE_OPTIONS) == {}
    assert read_option_json(write(tmp_path, {}, "empty.json")) == {}


def test_an_empty_file_object_changes_nothing(context, tmp_path):
    path = write(tmp_path, {})
    f = context.compile(double, X, storage.path(tmp_path / "f"), options={"option_json": path})
    assert f.program.options == {} and f.strict is False


# -- bad input: a clear error naming the file, and nothing compiled or loaded --------------------

BAD_FILES = [
    ({"float_dtype": "mixed", "fast": True}, ValueError,
     r"Unknown compile option\(s\) \['fast'\] in option_json file '.*options\.json'; known "
     r"options are float_dtype"),
    ('{"strict": tru', ValueError, r"option_json file '.*options\.json' is not valid JSON: "
                                   r"Expecting value at line 1, column 12"),
    ("[1, 2]", ValueError, r"must hold a JSON object of options.*not a JSON list"),
    ('{"strict": true, "strict": false}', ValueError,
     r"gives option 'strict' more than once"),
    ({"option_json": "other.json"}, ValueError, r"option files do not nest"),
    ({"strict": "yes"}, TypeError,
     r"Compile option 'strict' in option_json file '.*options\.json' must be a bool, "
     r"not 'yes'"),
    ({"float_dtype": "float64"}, ValueError,
     r"'float_dtype' in option_json file '.*options\.json' must be one of \[.*\], "
     r"not 'float64'"),
    (b"\xff\xfe{}", ValueError, r"option_json file '.*options\.json' cannot be read"),
]


@pytest.mark.parametrize("content, error, message", BAD_FILES,
                         ids=["unknown-key", "invalid-json", "not-an-object", "repeated-key",
                              "nested", "bad-strict", "bad-float-dtype", "not-utf8"])
def test_bad_files(context, tmp_path, content, error, message):
    path = tmp_path / "options.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write(tmp_path, content)
    _expect_nothing_done(context, tmp_path, {"option_json": path}, error, message)


def test_a_missing_file(context, tmp_path):
    _expect_nothing_done(context, tmp_path, {"option_json": tmp_path / "nope.json"}, ValueError,
                         r"option_json file '.*nope\.json' does not exist \(relative paths are "
                         r"taken from the current directory")


def test_a_directory(context, tmp_path):
    _expect_nothing_done(context, tmp_path, {"option_json": tmp_path}, ValueError,
                         r"option_json file '.*' cannot be read")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root reads files whatever their mode")
def test_an_unreadable_file(context, tmp_path):
    path = write(tmp_path, {"strict": True})
    path.chmod(0)
    try:
        _expect_nothing_done(context, tmp_path, {"option_json": path}, ValueError,
                             r"cannot be read: .*Permission denied")
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("value", [3, None, True, ""])
def test_option_json_must_be_a_path(context, tmp_path, value):
    _expect_nothing_done(context, tmp_path, {"option_json": value}, TypeError,
                         r"Compile option 'option_json' must be the path of a JSON file \(a "
                         r"non-empty str or os.PathLike\), not")


def test_dict_errors_still_name_no_file(context, tmp_path):
    _expect_nothing_done(context, tmp_path, {"fast": 1}, ValueError,
                         r"Unknown compile option\(s\) \['fast'\]; known options are")
    _expect_nothing_done(context, tmp_path, {"strict": 1}, TypeError,
                         r"Compile option 'strict' must be a bool, not 1")
    _expect_nothing_done(context, tmp_path, {1: True}, TypeError,
                         r"Compile option names must be str, not int \(1\)")
    _expect_nothing_done(context, tmp_path, [("strict", True)], TypeError,
                         r"Compile options must be a dict of option name -> value, not list")


def test_a_bad_dict_value_is_reported_even_when_the_file_is_good(context, tmp_path):
    path = write(tmp_path, {"strict": True})
    _expect_nothing_done(context, tmp_path, {"option_json": path, "strict": "no"}, TypeError,
                         r"Compile option 'strict' must be a bool, not 'no'")


def _expect_nothing_done(context, tmp_path, options, error, message):
    before = len(context.report())
    with pytest.raises(error, match=message):
        context.compile(double, X, storage.path(tmp_path / "f"), options=options)
    assert len(context.report()) == before
    assert not context.device.programs
    assert not (tmp_path / "f").exists()


def test_compile_options_describe_option_json_and_mixed():
    assert "JSON" in COMPILE_OPTIONS["option_json"]
    assert "'mixed'" in COMPILE_OPTIONS["float_dtype"]


def test_option_json_works_on_the_host_reference(tmp_path):
    path = write(tmp_path, {"float_dtype": "mixed"})
    with Context(MNDevice("pfvm:cpu")) as ctx:
        f = ctx.compile(double, X, storage.path(tmp_path / "f"), options={"option_json": path})
        assert "mixed_matmul" in [n.op for n in f.program.graph.nodes]
        torch.testing.assert_close(f(X)["y"].cpu(), torch.eye(4))


@pytest.mark.parametrize("argv", [[], ["pfvm:cpu"]])
def test_example_runs(tmp_path, argv):
    lines = run_example("option_json.py", *argv, cwd=tmp_path).stdout.splitlines()
    assert lines[0].startswith(f"on {argv[0] if argv else 'mncore2:auto'}")
    assert any("{'float_dtype': 'float32', 'strict': True}" in line for line in lines)
    assert lines[-1] == "option_json: options from the file applied, dict keys override them"


def test_a_deeply_nested_option_file_is_a_value_error(tmp_path):
    path = tmp_path / "opts.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="opts.json.*nested too deeply"):
        read_option_json(path)
