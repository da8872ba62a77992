"""The cost model (mlsdk.costs) against what mncore2:auto's report measures, to the cycle."""

from __future__ import annotations

import pytest
import torch
from mlsdk import storage
from mlsdk.costs import conversion_cost, handoff_cost, launch_cycles, memcopyable
from mncore_hdl.layout import host_layout, native_layout
from pipeline_fns import first, second, third


def _launch(record):
    return [r for r in record.commands if r.command.startswith("Launch")][0]


def _convert(record):
    return [r for r in record.commands if r.command.startswith("Convert")][0]


@pytest.mark.parametrize("shape", [(32, 64), (33, 65), (256, 128)])
def test_model_equals_the_report_for_a_chain_of_defaults(context, tmp_path, seed, shape):
    x = torch.randn(shape)
    w = torch.randn(shape[1], shape[1])
    f1 = context.compile(first, {"x": x}, storage.path(tmp_path / "1"))
    f2 = context.compile(second, {"a": x, "w": w}, storage.path(tmp_path / "2"))
    f3 = context.compile(third, {"b": x}, storage.path(tmp_path / "3"))
    config = context.mndevice.config
    a = f1({"x": x})["a"]
    b = f2({"a": a, "w": w})["b"]
    f3({"b": b})
    for fn, (proxy, io) in [(f2, (a, "a")), (f3, (b, "b"))]:
        record = context.report().calls(fn.name)[-1]
        assert record.conversions == 1
        model = conversion_cost(config, proxy.spec.layout, fn.input_specs[io].layout,
                                src_group=proxy.buffer.group, dst_group=fn.bindings[io].group)
        assert model.cycles == _convert(record).cycles
        assert model.converter_bytes == record.bytes["converter"]
    for fn in (f1, f2, f3):
        record = context.report().calls(fn.name)[-1]
        assert launch_cycles(config, fn.program) == _launch(record).cycles


def test_model_of_a_constrained_layout_equals_the_constrained_compile(context, tmp_path):
    x = torch.randn(64, 64)
    config = context.mndevice.config
    free = context.compile(first, {"x": x}, storage.path(tmp_path / "free"))
    rows = host_layout((64, 64), "float32")
    tied = context.compile(first, {"x": x}, storage.path(tmp_path / "tied"),
                           io_spec_constraints={"a": rows})
    predicted = launch_cycles(config, free.program, output_layouts={"a": rows})
    tied({"x": x})
    assert predicted == _launch(context.report().calls("first")[-1]).cycles
    # A host-rows output is written by one Group instead of four: the Launch costs more.
    assert predicted > launch_cycles(config, free.program)


def test_a_relocation_is_one_bind_cycle_and_moves_nothing(context, tmp_path):
    x = torch.randn(32, 64)
    config = context.mndevice.config
    f3 = context.compile(third, {"b": x}, storage.path(tmp_path / "3"))
    f1 = context.compile(first, {"x": x}, storage.path(tmp_path / "1"),
                         io_spec_constraints={"a": f3.input_specs["b"]})
    f3({"b": f1({"x": x})["a"]})
    record = context.report().calls("third")[-1]
    bind = [r for r in record.commands if r.command.startswith("Bind")][0]
    cost = handoff_cost(config, f1.output_specs["a"].layout, f3.input_specs["b"].layout)
    assert cost.relocation and cost.converter_bytes == 0
    assert cost.cycles == bind.cycles and record.relocations == 1


def test_memcopyable_is_the_iospec_rule():
    rows, tiles = host_layout((32, 64), "float32"), native_layout((32, 64), "float32")
    assert memcopyable(rows, rows) and not memcopyable(tiles, rows)
    assert memcopyable(tiles, native_layout((32, 64), "float32"))
