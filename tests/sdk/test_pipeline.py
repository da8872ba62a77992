"""Negotiated pipelines: results as eager, plans never worse than defaults or consumer-first."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from mlsdk import storage
from mlsdk.pipeline import PLAN_FILE, Pipeline
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout, native_layout
from pipeline_fns import decode_step, first, fourth, second, third

ROWS, COLS = 64, 64


def encoder(inputs):
    return {"h": (inputs["x"] @ inputs["w"]).tanh()}


def decoder(inputs):
    return {"y": inputs["h"] * inputs["q"] + 1}


def _check_totals(plan, strictly=True):
    totals = plan["totals"]
    best = totals["negotiated"]["cycles"]
    manual = min(c["cycles"] for c in totals["consumer_first"])
    assert best <= totals["defaults"]["cycles"] and best <= manual, totals
    if strictly:
        assert best < min(totals["defaults"]["cycles"], manual), totals


def _staged_cycles(report):
    """Cycles of the Launches and hand-offs (Bind, Convert) of every call: what the plan
    models (host writes of fresh inputs are the same whatever the plan)."""
    return sum(r.cycles for rec in report.calls() for r in rec.commands
               if not r.command.startswith("HostWrite"))


def test_chain_of_three(context, tmp_path, seed):
    x, w = torch.randn(ROWS, COLS), torch.randn(COLS, COLS)
    pipe = Pipeline(context)
    pipe.add("f3", third, {"b": x})  # any order
    pipe.add("f1", first, {"x": x})
    pipe.add("f2", second, {"a": x, "w": w})
    pipe.connect("f1.a", "f2.a")
    pipe.connect("f2.b", "f3.b")
    compiled = pipe.compile(storage.path(tmp_path / "pipe"))
    context.report(clear=True)
    a = compiled["f1"]({"x": x})["a"]
    b = compiled["f2"]({"a": a, "w": w})["b"]
    c = compiled["f3"]({"b": b})["c"].cpu()
    torch.testing.assert_close(c, third(second({"a": first({"x": x})["a"], "w": w}))["c"])
    report = context.report()
    assert report.totals["conversions"] == 0 and report.totals["relocations"] == 2
    plan = compiled.plan
    _check_totals(plan)
    assert all(e["relocation"] for e in plan["edges"])
    # every hand-off relocates, so the model is the measurement, to the cycle
    assert _staged_cycles(report) == plan["totals"]["negotiated"]["cycles"]
    saved = json.loads((tmp_path / "pipe" / PLAN_FILE).read_text())
    assert saved == plan
    assert (tmp_path / "pipe" / "f2").is_dir()
    for edge in plan["edges"]:
        totals = [a["total_cycles"] for a in edge["alternatives"]]
        assert min(totals) == plan["totals"]["negotiated"]["cycles"] and len(totals) >= 2


def test_fan_out_to_three_consumers_that_prefer_different_layouts(context, tmp_path, seed):
    x = torch.randn(ROWS, COLS)
    rows = host_layout((ROWS, COLS), "float32")
    tiles = native_layout((ROWS, COLS), "float32")
    halves = native_layout((ROWS, COLS), "float32", dataclasses.replace(MNCORE2, groups=2))
    pipe = Pipeline(context)
    pipe.add("p", second, {"a": x, "w": x})
    pipe.add("c1", third, {"b": x}, io_spec_constraints={"b": rows})
    pipe.add("c2", fourth, {"b": x}, io_spec_constraints={"b": halves})
    pipe.add("c3", third, {"b": x}, io_spec_constraints={"b": tiles})
    for consumer in ("c1", "c2", "c3"):
        pipe.connect("p.b", f"{consumer}.b")
    compiled = pipe.compile(storage.path(tmp_path / "pipe"))
    context.report(clear=True)
    b = compiled["p"]({"a": x, "w": x})["b"]
    want = second({"a": x, "w": x})["b"]
    torch.testing.assert_close(compiled["c1"]({"b": b})["c"].cpu(), third({"b": want})["c"])
    torch.testing.assert_close(compiled["c2"]({"b": b})["d"].cpu(), fourth({"b": want})["d"])
    torch.testing.assert_close(compiled["c3"]({"b": b})["c"].cpu(), third({"b": want})["c"])
    plan = compiled.plan
    _check_totals(plan, strictly=False)
    assert len(plan["totals"]["consumer_first"]) == 3
    # the pins hold: exactly one consumer relocates, whichever layout the producer writes
    assert sum(e["relocation"] for e in plan["edges"]) == 1
    assert context.report().totals["conversions"] == 2
    # the compiled plan's model, with each conversion into its destination's real Group
    assert _staged_cycles(context.report()) == plan["totals"]["negotiated"]["placed_cycles"]


def test_decode_loop(context, tmp_path, seed):
    k0, xs = torch.randn(16, COLS), [torch.randn(16, COLS) for _ in range(4)]
    pipe = Pipeline(context)
    pipe.add("step", decode_step, {"k": k0, "x": xs[0]}, calls=4)
    pipe.connect("step.k_out", "step.k", count=3)
    compiled = pipe.compile(storage.path(tmp_path / "pipe"))
    step = compiled["step"]
    assert step.output_specs["k_out"].is_memcopyable_to(step.input_specs["k"])
    context.report(clear=True)
    k, want = k0, k0
    for x in xs:
        out = step({"k": k, "x": x})
        k = out["k_out"]
        ref = decode_step({"k": want, "x": x})
        torch.testing.assert_close(out["y"].cpu(), ref["y"])
        want = ref["k_out"]
    torch.testing.assert_close(k.cpu(), want)
    calls = context.report(clear=False).calls("decode_step")
    assert [c.relocations for c in calls] == [0, 1, 1, 1]
    _check_totals(compiled.plan)


def test_encoder_feeding_a_decoder_twice(context, tmp_path, seed):
    x, w = torch.randn(ROWS, COLS), torch.randn(COLS, COLS)
    qs = [torch.randn(ROWS, COLS) for _ in range(2)]
    compiled = context.compile_pipeline(
        {"dec": (decoder, {"h": x, "q": qs[0]}, {"calls": 2}),
         "enc": (encoder, {"x": x, "w": w})},
        [("enc.h", "dec.h")], storage.path(tmp_path / "pipe"))
    assert compiled.plan["edges"][0]["count"] == 2
    context.report(clear=True)
    h = compiled["enc"]({"x": x, "w": w})["h"]
    want = encoder({"x": x, "w": w})["h"]
    for q in qs:
        got = compiled["dec"]({"h": h, "q": q})["y"].cpu()
        torch.testing.assert_close(got, decoder({"h": want, "q": q})["y"])
    assert context.report().totals["relocations"] == 2
    _check_totals(compiled.plan)


def test_a_trade_the_plan_takes_on_purpose(context, tmp_path):
    """Consumer-first makes the producer write host rows (one Group: its Launch costs more);
    the negotiated plan has the consumer read the producer's tiles instead."""
    x = torch.randn(256, 256)
    compiled = context.compile_pipeline(
        {"p": (first, {"x": x}), "c": (third, {"b": x})}, [("p.a", "c.b")],
        storage.path(tmp_path / "pipe"))
    plan = compiled.plan
    (manual,) = plan["totals"]["consumer_first"]
    assert plan["totals"]["negotiated"]["cycles"] < manual["cycles"]
    assert plan["edges"][0]["dst_layout"] == str(native_layout((256, 256), "float32"))
    assert plan["functions"]["c"]["constraints"] == {"b": plan["edges"][0]["dst_layout"]}
    assert plan["functions"]["p"]["constraints"] == {}


def test_plain_compile_is_unchanged_by_a_pipeline(context, tmp_path):
    x = torch.randn(32, 64)
    context.compile_pipeline({"p": (first, {"x": x}), "c": (third, {"b": x})},
                             [("p.a", "c.b")], storage.path(tmp_path / "pipe"))
    plain = context.compile(third, {"b": x}, storage.path(tmp_path / "plain"))
    assert plain.input_specs["b"].layout == host_layout((32, 64), "float32")


@pytest.mark.parametrize("edge, message", [
    (("p.zz", "c.b"), r"p has no output 'zz'; its outputs are \['a'\]"),
    (("p.a", "q.b"), r"no function 'q'"),
    (("pa", "c.b"), r"'function.io'"),
])
def test_bad_edges_are_clear_errors(context, tmp_path, edge, message):
    x = torch.randn(32, 64)
    with pytest.raises(ValueError, match=message):
        context.compile_pipeline({"p": (first, {"x": x}), "c": (third, {"b": x})}, [edge],
                                 storage.path(tmp_path / "pipe"))


def test_an_edge_between_different_shapes_is_a_clear_error(context, tmp_path):
    with pytest.raises(ValueError, match=r"cannot hand .* they differ in shape"):
        context.compile_pipeline({"p": (first, {"x": torch.randn(32, 64)}),
                                  "c": (third, {"b": torch.randn(16, 64)})},
                                 [("p.a", "c.b")], storage.path(tmp_path / "pipe"))


def test_bad_function_entries_and_calls(context):
    pipe = Pipeline(context)
    with pytest.raises(ValueError, match="calls must be a positive int, not 0"):
        pipe.add("f", first, {"x": torch.ones(2, 2)}, calls=0)
    pipe.add("f", first, {"x": torch.ones(2, 2)})
    with pytest.raises(ValueError, match="already has a function named 'f'"):
        pipe.add("f", first, {"x": torch.ones(2, 2)})
    with pytest.raises(TypeError, match=r"functions\['f'\] must be \(fn, sample_inputs\)"):
        context.compile_pipeline({"f": first}, [], storage.path("/tmp/never"))


def test_coordinate_descent_finds_the_exhaustive_plan(context, tmp_path, monkeypatch):
    from mlsdk.pipeline import negotiate

    x, w = torch.randn(ROWS, COLS), torch.randn(COLS, COLS)
    functions = {"f1": (first, {"x": x}), "f2": (second, {"a": x, "w": w}),
                 "f3": (third, {"b": x})}
    edges = [("f1.a", "f2.a"), ("f2.b", "f3.b")]
    exhaustive = context.compile_pipeline(functions, edges, storage.path(tmp_path / "e")).plan
    monkeypatch.setattr(negotiate, "EXHAUSTIVE_LIMIT", 0)
    descended = context.compile_pipeline(functions, edges, storage.path(tmp_path / "d")).plan
    assert descended["totals"] == exhaustive["totals"]
    assert descended["edges"] == exhaustive["edges"]
