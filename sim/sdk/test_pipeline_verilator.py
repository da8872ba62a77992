"""A negotiated pipeline on the RTL (Verilator): its relocations leave the layout converter idle,
and the measured cycles are within 5% of the plan's model.

Two pipelines (a chain of three functions, a decode loop carrying its state) are compiled with
``Context.compile_pipeline`` and run once on ``mncore2:verilator``: every hand-off is a Bind,
the converter's counters (``busy_cycles``, beats read and written) do not move, the results
equal torch eager, and the measured cycles of the Launches and Binds are within
:data:`TOLERANCE` of the plan's modeled total.
"""

from __future__ import annotations

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.flows import require_device

DEVICE = "mncore2:verilator"
TOLERANCE = 0.05
CONVERTER = ("converter.busy_cycles", "converter.beats_read", "converter.beats_written")


def first(inputs):
    return {"a": inputs["x"] * 2}


def second(inputs):
    return {"b": inputs["a"] + 1}


def third(inputs):
    return {"c": inputs["b"].relu()}


def decode_step(inputs):
    k = inputs["k"]
    return {"k_out": k * 0.5 + inputs["x"], "y": (k + inputs["x"]).sum(dim=0)}


def _chain(ctx, work, x):
    pipe = ctx.compile_pipeline({"f3": (third, {"b": x}), "f2": (second, {"a": x}),
                                 "f1": (first, {"x": x})},
                                [("f1.a", "f2.a"), ("f2.b", "f3.b")], storage.path(work))

    def run():
        a = pipe["f1"]({"x": x})["a"]
        return pipe["f3"]({"b": pipe["f2"]({"a": a})["b"]})["c"]

    return pipe, run, third(second(first({"x": x})))["c"]


def _decode(ctx, work, x):
    pipe = ctx.compile_pipeline({"step": (decode_step, {"k": x, "x": x}, {"calls": 3})},
                                [("step.k_out", "step.k", 2)], storage.path(work))

    def run():
        k = x
        for _ in range(3):
            k = pipe["step"]({"k": k, "x": x})["k_out"]
        return k

    want = x
    for _ in range(3):
        want = decode_step({"k": want, "x": x})["k_out"]
    return pipe, run, want


@pytest.mark.parametrize("build", [_chain, _decode], ids=["chain3", "decode3"])
def test_negotiated_pipeline_leaves_the_converter_idle(build, tmp_path):
    require_device(DEVICE)
    torch.manual_seed(0)
    x = torch.randn(32, 64)
    with Context(MNDevice(DEVICE)) as ctx:
        pipe, run, want = build(ctx, tmp_path / "pipe", x)
        assert all(e["relocation"] for e in pipe.plan["edges"]), pipe.plan["edges"]
        before = ctx.device.counters()
        ctx.report(clear=True)
        got = run()
        report = ctx.report()
        after = ctx.device.counters()
        torch.testing.assert_close(got.cpu(), want)
    for name in CONVERTER:
        assert after[name] == before[name], f"{name} moved: {before[name]} -> {after[name]}"
    calls = report.calls()
    assert all(r.conversions == 0 and r.bytes["converter"] == 0 for r in calls)
    assert all(r.cycles_kind == "measured" for r in calls)
    measured = sum(c.cycles for r in calls for c in r.commands
                   if not c.command.startswith("HostWrite"))
    model = pipe.plan["totals"]["negotiated"]["placed_cycles"]
    print(f"measured {measured}, plan {model} ({(model - measured) / measured:+.1%})")
    assert abs(model - measured) <= TOLERANCE * measured, (measured, model)
