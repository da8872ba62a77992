"""The three ways to hand a tensor from one compiled function to the next (docs/pipelines.md).

1. MLSDK consumer-first: compile the consumer, constrain the producer's output to its input.
2. Loop-carried: a decode step whose cache output feeds its own input, in one compile.
3. Negotiated: Context.compile_pipeline chooses every hand-off's layout.

    ./exec_with_env.sh python3 examples/pipeline_handoffs.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage


def producer(inputs):
    return {"shared": inputs["x"] * 2}


def consumer(inputs):
    return {"result": inputs["shared"] + 1}


def decode(inputs):
    k = inputs["k"]
    return {"k_out": k * 0.5 + inputs["x"], "y": (k + inputs["x"]).sum(dim=0)}


def _handoff(record) -> str:
    return (f"{record.relocations} relocation(s), {record.conversions} conversion(s), "
            f"{record.bytes['converter']} converter bytes, {record.cycles} cycles")


def consumer_first(work: Path, x: torch.Tensor) -> None:
    with Context(MNDevice("mncore2:auto")) as ctx:
        cons = ctx.compile(consumer, {"shared": x}, storage.path(work / "c"))
        plain = ctx.compile(producer, {"x": x}, storage.path(work / "p0"))
        tied = ctx.compile(producer, {"x": x}, storage.path(work / "p1"),
                           io_spec_constraints={"shared": cons.input_specs["shared"]})
        cons(plain({"x": x}))
        print("defaults:       consumer call:", _handoff(ctx.report().calls("consumer")[-1]))
        for piece in ctx.report().advice():
            print("  advice:", piece)
        cons(tied({"x": x}))
        print("consumer-first: consumer call:", _handoff(ctx.report().calls("consumer")[-1]))


def loop_carried(work: Path, x: torch.Tensor) -> None:
    for constraints in (None, {"k_out": "k"}):
        with Context(MNDevice("mncore2:auto")) as ctx:
            step = ctx.compile(decode, {"k": x, "x": x}, storage.path(work / "d"),
                               io_spec_constraints=constraints)
            k = x
            for _ in range(4):
                k = step({"k": k, "x": x})["k_out"]
            calls = ctx.report().calls("decode")
            print(f"io_spec_constraints={constraints}: 4 steps, "
                  f"{sum(c.conversions for c in calls)} conversion(s), "
                  f"{sum(c.relocations for c in calls)} relocation(s), "
                  f"{sum(c.bytes['converter'] for c in calls)} converter bytes, "
                  f"{sum(c.cycles for c in calls)} cycles")


def negotiated(work: Path, x: torch.Tensor) -> None:
    with Context(MNDevice("mncore2:auto")) as ctx:
        pipe = ctx.compile_pipeline(
            {"consumer": (consumer, {"shared": x}), "producer": (producer, {"x": x})},
            [("producer.shared", "consumer.shared")], storage.path(work / "pipe"))
        print(pipe.summary())
        print("constraints:", {n: f["constraints"] for n, f in pipe.plan["functions"].items()})
        pipe["consumer"](pipe["producer"]({"x": x}))
        print("consumer call:", _handoff(ctx.report().calls("consumer")[-1]))


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 256)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("== 1. MLSDK consumer-first ==")
        consumer_first(work / "1", x)
        print("== 2. loop-carried ==")
        loop_carried(work / "2", x)
        print("== 3. negotiated ==")
        negotiated(work / "3", x)


if __name__ == "__main__":
    main()
