"""IOSpec: how a compiled function's inputs and outputs print, compare and serialise, and the
clear errors of bad fields."""

from __future__ import annotations

import json

import pytest
import torch
from mlsdk import IOSpec
from mncore_hdl.layout import Layout


def test_iospec_prints_compares_and_serialises(doubled):
    spec = doubled.input_specs["x"]
    assert str(spec) == ("IOSpec('x': 32x64 float32 in DRAM, layout (32,64)/((32:32), "
                         "(32:1, 2_W:1)), 8192 bytes)")
    assert "layout='(32,64)/((32:32), (32:1, 2_W:1))'" in repr(spec)
    again = IOSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and hash(again) == hash(spec)
    out = doubled.output_specs["y"]
    assert out != spec
    assert not out.is_memcopyable_to(spec)
    renamed = IOSpec("other", spec.shape, spec.dtype, spec.layout)
    assert renamed != spec and renamed.is_memcopyable_to(spec)
    assert spec.nbytes == 32 * 64 * 4 and spec.location == "DRAM"
    with pytest.raises(TypeError, match="takes an IOSpec, not str"):
        spec.is_memcopyable_to("x")  # type: ignore[arg-type]


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


def test_iospec_dtype_must_match_its_layout():
    layout = Layout.parse("(4,4)/((4:4), (4:1))", "float32")
    assert IOSpec("x", (4, 4), torch.float32, layout).dtype == torch.float32
    with pytest.raises(ValueError, match="dtype float16 disagrees with its layout's element "
                                         "type float32"):
        IOSpec("x", (4, 4), torch.float16, layout)
    with pytest.raises(ValueError, match=r"shape \(2, 8\) disagrees with its layout's shape"):
        IOSpec("x", (2, 8), torch.float32, layout)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"):
        IOSpec("x", (4, 4), "float32", layout)  # type: ignore[arg-type]
