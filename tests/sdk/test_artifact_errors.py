"""Odd paths, IOSpec fields, option files, layout strings and unwritable traces give the
package's own errors, naming what was wrong (issue 22, items 8, 11 and 13)."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from mlsdk import CacheError, CacheOptions, CodegenError, IOSpec, storage, trace_scope
from mlsdk.options import read_option_json
from mncore_hdl.layout import Layout, LayoutError


def add(inputs):
    return {"out": inputs["x"] + 1}


# -- paths --------------------------------------------------------------------------------------


def test_a_path_of_an_unknown_user_is_a_value_error():
    with pytest.raises(ValueError, match="~nosuchuser.*user after '~'"):
        storage.path("~nosuchuser/x")


def test_a_nul_byte_in_a_path_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="NUL byte"):
        storage.path(f"{tmp_path}/a\0b")
    with pytest.raises(ValueError, match="NUL byte"):
        storage.path(tmp_path) / "a\0b"


def test_a_codegen_directory_2000_levels_deep_is_a_codegen_error(context, tmp_path):
    deep = storage.path(tmp_path).joinpath(*["d"] * 2000)
    with pytest.raises(CodegenError, match="2[0-9]{3} levels deep|File name too long"):
        context.compile(add, {"x": torch.randn(4)}, deep)


def test_a_cache_directory_2000_levels_deep_is_a_cache_error(context, tmp_path):
    deep = tmp_path.joinpath(*["d"] * 2000)
    with pytest.raises(CacheError, match="levels deep|File name too long"):
        context.compile(add, {"x": torch.randn(4)}, storage.path(tmp_path) / "out",
                        cache_options=CacheOptions(deep))


# -- IOSpec -------------------------------------------------------------------------------------


def _layout():
    return Layout.parse("(4,8)/((4:8), (8:1))", "float32")


@pytest.mark.parametrize("shape", [(4.7, 8), "48", (True, 8), None])
def test_iospec_refuses_shapes_that_are_not_ints(shape):
    with pytest.raises(TypeError, match="shape must be a tuple of ints"):
        IOSpec("x", shape, torch.float32, _layout())


def test_iospec_accepts_int_like_dims():
    spec = IOSpec("x", (torch.tensor(4).item(), torch.Size([8])[0]), torch.float32, _layout())
    assert spec.shape == (4, 8)


def test_iospec_from_dict_names_missing_keys():
    with pytest.raises(ValueError, match=r"lacks \['dtype', 'layout'\]"):
        IOSpec.from_dict({"name": "x", "shape": [4, 8]})
    with pytest.raises(ValueError, match="must name a torch dtype"):
        IOSpec.from_dict({"name": "x", "shape": [4, 8], "dtype": "nn", "layout": "(4)/((4:1))"})


def test_iospec_round_trips_through_a_dict():
    spec = IOSpec("x", (4, 8), torch.float32, _layout())
    assert IOSpec.from_dict(spec.to_dict()) == spec


# -- option files and layouts -------------------------------------------------------------------


def test_a_deeply_nested_option_file_is_a_value_error(tmp_path):
    path = tmp_path / "opts.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="opts.json.*nested too deeply"):
        read_option_json(path)


@pytest.mark.parametrize("text", [f"({'9' * 400})/(({'9' * 400}:1))",
                                  "(4)/((4:99999999999999999999))"])
def test_huge_layout_extents_are_layout_errors(text):
    with pytest.raises(LayoutError, match="below 2\\*\\*48"):
        Layout.parse(text)


# -- traces -------------------------------------------------------------------------------------


needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"),
                                    reason="needs /dev/full to make writes fail")


@needs_dev_full
def test_a_trace_that_cannot_be_written_names_the_file(context, tmp_path):
    with pytest.raises(OSError, match="could not write the trace file '/dev/full'"):
        with trace_scope("/dev/full"):
            context.compile(add, {"x": torch.randn(4)}, storage.path(tmp_path) / "out")


@needs_dev_full
def test_a_failed_trace_never_masks_the_blocks_own_exception(context, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyError, match="the user's own"):
            with trace_scope("/dev/full"):
                context.compile(add, {"x": torch.randn(4)}, storage.path(tmp_path) / "out")
                raise KeyError("the user's own")
    assert any("/dev/full" in str(w.message) for w in caught)
