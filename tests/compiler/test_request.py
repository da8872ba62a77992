"""CompileRequest: built once, checked once, frozen; its constraints resolved against a graph."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from mncore_compiler.capture import capture
from mncore_compiler.layouts import ConstraintError
from mncore_compiler.request import EXPORT_KWARGS, OPTIONS, CompileRequest
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout, native_layout


def _graph():
    return capture(lambda d: {"y": d["x"] * 2, "k_out": d["k"] + 1},
                   {"x": torch.randn(4, 8), "k": torch.randn(16)})


def test_defaults_and_options():
    request = CompileRequest()
    assert request.float_dtype == "float32" and request.strict is False
    assert request.option("backprop") is False and dict(request.options) == {}
    mixed = CompileRequest(options={"float_dtype": "mixed", "strict": True})
    assert mixed.float_dtype == "mixed" and mixed.strict is True
    assert set(OPTIONS) == {"float_dtype", "strict", "backprop"}
    with pytest.raises(KeyError, match="'fast' is not a compile option"):
        request.option("fast")


def test_it_is_frozen_and_copies_what_it_is_given():
    given = {"strict": True}
    request = CompileRequest(options=given)
    given["strict"] = False
    assert request.strict is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.options["strict"] = False  # type: ignore[index]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"options": {"fast": 1}}, ValueError, r"Unknown compile option\(s\) \['fast'\]"),
    ({"options": {"strict": 1}}, TypeError, r"'strict' must be a bool, not 1"),
    ({"options": {"float_dtype": "double"}}, ValueError, r"'float_dtype' must be one of"),
    ({"options": [("strict", True)]}, TypeError, r"must be a dict of option name"),
    ({"training": "yes"}, TypeError, r"training must be None, True or False"),
    ({"name": ""}, TypeError, r"program name must be a non-empty str"),
    ({"config": "mncore2"}, TypeError, r"config must be an ArchConfig"),
    ({"constraints": {"y": 3}}, TypeError, r"\['y'\] must be an IOSpec .* not int"),
    ({"constraints": [("y", "x")]}, TypeError, r"io_spec_constraints must be a dict"),
    ({"export_kwargs": {"opset": 17}}, ValueError, r"Unknown export_kwargs key 'opset'"),
    ({"export_kwargs": {"use_fx2onnx": 1}}, TypeError, r"\['use_fx2onnx'\] must be a bool"),
])
def test_bad_values_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        CompileRequest(**kwargs)


def test_a_layout_wider_than_the_chip_is_refused():
    wide = native_layout((64, 64), "float32", MNCORE2)
    small = MNCORE2.replace(groups=1)
    if wide.groups <= small.groups:
        pytest.skip("the native layout of (64, 64) spans one Group on this configuration")
    with pytest.raises(ConstraintError, match="spans .* Groups; the device has 1"):
        CompileRequest(config=small, constraints={"y": wide})


def test_constraint_layouts_resolve_loop_carried_outputs():
    graph = _graph()
    k = host_layout((16,), "float32")
    assert CompileRequest(constraints={"k_out": "k"}).constraint_layouts(graph) == {
        "k_out": k, "k": k}
    given = native_layout((16,), "float32", MNCORE2)
    assert CompileRequest(constraints={"k": given, "k_out": "k"}).constraint_layouts(graph) == {
        "k_out": given, "k": given}


@pytest.mark.parametrize("constraints, message", [
    ({"z": host_layout((4, 8), "float32")}, r"'z' is not an input or output"),
    ({"y": host_layout((8, 4), "float32")}, r"describes a float32 tensor of shape \(8, 4\)"),
    ({"k_out": "kk"}, r"a str value must name an input .*\['x', 'k'\]"),
    ({"x": "k"}, r"goes on an output, but 'x' is an input"),
    ({"y": "k"}, r"'y' to be produced in the layout of input 'k', which cannot hold it"),
])
def test_constraint_layouts_errors(constraints, message):
    with pytest.raises(ConstraintError, match=message) as info:
        CompileRequest(constraints=constraints).constraint_layouts(_graph())
    assert info.value.key == next(iter(constraints))


def test_key_parts_follow_what_decides_the_program():
    base = CompileRequest(name="f")
    parts = base.key_parts()
    assert parts == CompileRequest(name="f", registered={1: "m.w"}).key_parts()
    for other in (CompileRequest(name="g"), CompileRequest(name="f", training=True),
                  CompileRequest(name="f", options={"strict": True}),
                  CompileRequest(name="f", constraints={"y": "x"}),
                  CompileRequest(name="f", config=MNCORE2.replace(clock_mhz=1))):
        assert other.key_parts() != parts
    assert "use_fx2onnx" in EXPORT_KWARGS
