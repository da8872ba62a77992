"""IOSpec: how a compiled function's inputs and outputs print, compare and serialise."""

from __future__ import annotations

import json

import pytest
from mlsdk import IOSpec


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
