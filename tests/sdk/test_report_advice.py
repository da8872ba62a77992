"""Advice in the report: each conversion names the constraint that removes it and what that
saves, and applying it saves exactly that."""

from __future__ import annotations

import json
import re

import pytest
import torch
from mlsdk import Context, ConversionRequiredError, MNDevice, storage
from pipeline_fns import decode_step, first, second, third


def _chain(tmp_path, x, w, advice=None, options=None):
    """Run the chain once in a fresh Context, consumers compiled first (the same allocation
    order with and without advice); ``advice`` is applied as the producer's constraint."""
    ctx = Context(MNDevice("mncore2:auto"))
    fns = {}
    samples = {"third": {"b": x}, "second": {"a": x, "w": w}, "first": {"x": x}}
    for name, fn in [("third", third), ("second", second), ("first", first)]:
        constraints = None
        if advice is not None and advice.producer == name:
            constraints = {advice.output: fns[advice.consumer].input_specs[advice.input]}
        fns[name] = ctx.compile(fn, samples[name], storage.path(tmp_path / name),
                                io_spec_constraints=constraints, options=options)
    a = fns["first"]({"x": x})["a"]
    b = fns["second"]({"a": a, "w": w})["b"]
    c = fns["third"]({"b": b})["c"].cpu()
    return ctx, c


def _call_totals(report):
    calls = report.calls()
    return sum(r.cycles for r in calls), sum(r.bytes["converter"] for r in calls)


@pytest.mark.parametrize("shape", [(32, 64), (256, 128)])
def test_applying_each_piece_of_advice_saves_what_it_promised(tmp_path, seed, shape):
    x, w = torch.randn(shape), torch.randn(shape[1], shape[1])
    ctx, want = _chain(tmp_path / "base", x, w)
    report = ctx.report()
    ctx.close()
    pieces = report.advice()
    assert len(pieces) == 2 == report.totals["conversions"]
    assert {(p.producer, p.output, p.consumer, p.input) for p in pieces} == {
        ("first", "a", "second", "a"), ("second", "b", "third", "b")}
    cycles, moved = _call_totals(report)
    for i, piece in enumerate(pieces):
        assert piece.cycles == piece.conversion_cycles - 1 - piece.launch_cycles
        # the producer writes one Group instead of four: its Launch costs more
        assert piece.launch_cycles > 0 and piece.cycles > 0
        applied, got = _chain(tmp_path / f"fix{i}", x, w, advice=piece)
        after = applied.report()
        applied.close()
        assert after.totals["conversions"] == 1
        after_cycles, after_moved = _call_totals(after)
        assert cycles - after_cycles == piece.cycles, piece
        assert moved - after_moved == piece.converter_bytes, piece
        torch.testing.assert_close(got, want)


def test_loop_advice_names_the_input_and_saves_what_it_promised(tmp_path, seed):
    k0, x = torch.randn(16, 64), torch.randn(16, 64)
    runs = []
    for constraints in (None, {"k_out": "k"}):
        with Context(MNDevice("mncore2:auto")) as ctx:
            step = ctx.compile(decode_step, {"k": k0, "x": x}, storage.path(tmp_path / "d"),
                               io_spec_constraints=constraints)
            k = k0
            for _ in range(3):
                k = step({"k": k, "x": x})["k_out"]
            runs.append(ctx.report().calls("decode_step"))
    before, after = runs
    for old, new in zip(before[1:], after[1:], strict=True):
        (piece,) = old.advice
        assert piece.loop and piece.constraint == "io_spec_constraints={'k_out': 'k'}"
        assert old.cycles - new.cycles == piece.cycles
        assert old.bytes["converter"] - new.bytes["converter"] == piece.converter_bytes
        assert new.advice == [] and new.relocations == 1


def test_advice_is_in_the_table_and_the_json(tmp_path):
    x, w = torch.randn(32, 64), torch.randn(64, 64)
    ctx, _ = _chain(tmp_path, x, w)
    report = ctx.report()
    ctx.close()
    table = report.table()
    assert re.search(r"advice: compile first with io_spec_constraints=\{'a': "
                     r"second\.input_specs\['a'\]\}: saves \d+ modeled cycles and 16384 "
                     r"converter bytes", table), table
    data = json.loads(report.to_json())
    (record,) = [r for r in data["records"] if r["function"] == "second" and r["kind"] == "call"]
    (piece,) = record["advice"]
    assert piece["producer"] == "first" and piece["converter_bytes"] == 16384
    assert piece["spec"].startswith("IOSpec('a': 32x64 float32")
    assert [p["cycles"] for p in data["advice"]] == [p.cycles for p in report.advice()]


def test_advice_merges_equal_conversions_over_a_session(tmp_path):
    x, w = torch.randn(32, 64), torch.randn(64, 64)
    with Context(MNDevice("mncore2:auto")) as ctx:
        f1 = ctx.compile(first, {"x": x}, storage.path(tmp_path / "1"))
        f2 = ctx.compile(second, {"a": x, "w": w}, storage.path(tmp_path / "2"))
        for _ in range(3):
            f2({"a": f1({"x": x})["a"], "w": w})
        report = ctx.report()
    (piece,) = report.advice()
    single = report.calls("second")[-1].advice[0]
    assert piece.count == 3 and piece.cycles == 3 * single.cycles
    assert piece.converter_bytes == 3 * single.converter_bytes
    assert "over 3 conversions" in str(piece)
    assert report.advice(top=0) == []


def test_strict_mode_error_carries_the_advice(tmp_path):
    x, w = torch.randn(32, 64), torch.randn(64, 64)
    ctx, _ = _chain(tmp_path / "base", x, w)
    (piece,) = ctx.report().calls("second")[-1].advice
    ctx.close()
    with Context(MNDevice("mncore2:auto")) as ctx:
        f2 = ctx.compile(second, {"a": x, "w": w}, storage.path(tmp_path / "2"),
                         options={"strict": True})
        f1 = ctx.compile(first, {"x": x}, storage.path(tmp_path / "1"))
        with pytest.raises(ConversionRequiredError) as info:
            f2({"a": f1({"x": x})["a"], "w": w})
    message = str(info.value)
    assert "compile first with io_spec_constraints={'a': second.input_specs['a']}" in message
    assert f"saves {piece.cycles} modeled cycles and {piece.converter_bytes} converter" \
        in message
