"""Hand-offs across whole pipelines: all defaults vs manual consumer-first vs negotiated.

For four pipeline shapes (a chain of 3, a fan-out of 1 to 3 consumers that prefer different
layouts, a decode loop of 4 steps carrying its state, an encoder feeding a decoder twice) at
each hand-off size (fp32 tensors of 256 columns), compiles the pipeline three ways on the
functional model, runs it once, and prints the converter bytes and the modeled cycles of the
run's Launches and hand-offs (Bind, Convert; host writes of fresh inputs left out) from
``Context.report()``, side by side, with the negotiated plan's own model of the same:

- defaults: every function compiled with plain ``compile`` (consumers' pinned layouts kept);
- consumer-first: MLSDK's manual way, consumers compiled first and each producer output
  constrained to its first consumer's input spec (a loop: ``{"k_out": "k"}``);
- negotiated: ``Context.compile_pipeline`` (``docs/pipelines.md``).

    ./exec_with_env.sh python3 bench/bench_pipeline.py [--kib 1024,16384] [--device mncore2:auto]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from mlsdk import Context, MNDevice, storage
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout, native_layout

COLS = 256
VARIANTS = ("defaults", "consumer-first", "negotiated")


def scale(inputs):
    return {"a": inputs["x"] * 2}


def shift(inputs):
    return {"b": inputs["a"] + 1}


def clip(inputs):
    return {"c": inputs["b"].relu()}


def square(inputs):
    return {"c": inputs["b"] * inputs["b"]}


def decode_step(inputs):
    k = inputs["k"]
    return {"k_out": k * 0.5 + inputs["x"], "y": (k + inputs["x"]).sum(dim=0)}


def encoder(inputs):
    return {"h": inputs["x"].tanh()}


def decoder(inputs):
    return {"y": inputs["h"] * inputs["q"] + 1}


@dataclass
class Shape:
    """A pipeline: its functions (name -> fn, input names, Pipeline.add kwargs), hand-offs,
    and one run (compiled functions and a tensor maker -> the outputs read back)."""

    name: str
    functions: dict[str, tuple[Callable[..., Any], tuple[str, ...], dict[str, Any]]]
    edges: list[tuple[str, str, int]]
    run: Callable[[dict[str, Any], Callable[[], torch.Tensor]], list[torch.Tensor]]
    pins: Callable[[tuple[int, int]], dict[str, dict[str, Any]]] = field(
        default=lambda shape: {})


def _chain(fns, make):
    a = fns["f1"]({"x": make()})["a"]
    return [fns["f3"]({"b": fns["f2"]({"a": a})["b"]})["c"].cpu()]


def _fan_out(fns, make):
    b = fns["p"]({"a": make()})["b"]
    return [fns[c]({"b": b})["c"].cpu() for c in ("c1", "c2", "c3")]


def _decode(fns, make):
    k = make()
    ys = []
    for _ in range(4):
        out = fns["step"]({"k": k, "x": make()})
        k = out["k_out"]
        ys.append(out["y"].cpu())
    return [k.cpu(), *ys]


def _encode_decode(fns, make):
    h = fns["enc"]({"x": make()})["h"]
    return [fns["dec"]({"h": h, "q": make()})["y"].cpu() for _ in range(2)]


def _fan_out_pins(shape):
    halves = native_layout(shape, "float32", dataclasses.replace(MNCORE2, groups=2))
    return {"c1": {"b": host_layout(shape, "float32")}, "c2": {"b": halves},
            "c3": {"b": native_layout(shape, "float32")}}


SHAPES = [
    Shape("chain3", {"f1": (scale, ("x",), {}), "f2": (shift, ("a",), {}),
                     "f3": (clip, ("b",), {})},
          [("f1.a", "f2.a", 1), ("f2.b", "f3.b", 1)], _chain),
    Shape("fanout3", {"p": (shift, ("a",), {}), "c1": (clip, ("b",), {}),
                      "c2": (square, ("b",), {}), "c3": (clip, ("b",), {})},
          [("p.b", "c1.b", 1), ("p.b", "c2.b", 1), ("p.b", "c3.b", 1)], _fan_out,
          _fan_out_pins),
    Shape("decode4", {"step": (decode_step, ("k", "x"), {"calls": 4})},
          [("step.k_out", "step.k", 3)], _decode),
    Shape("enc-dec2", {"enc": (encoder, ("x",), {}), "dec": (decoder, ("h", "q"), {"calls": 2})},
          [("enc.h", "dec.h", 2)], _encode_decode),
]


def _compile_plain(ctx, shape: Shape, sample, work: Path, manual: bool) -> dict[str, Any]:
    """Plain ``compile`` of every function; ``manual``: consumers first, each producer output
    constrained to its first consumer's input spec."""
    pins = shape.pins(tuple(sample.shape))
    first_consumer: dict[tuple[str, str], tuple[str, str]] = {}
    for src, dst, _ in shape.edges:
        first_consumer.setdefault(tuple(src.split(".")), tuple(dst.split(".")))
    fns: dict[str, Any] = {}
    pending = list(shape.functions)
    while pending:
        for name in pending:
            wants = [d for (f, _), (d, _) in first_consumer.items() if f == name and d != name]
            if manual and any(d not in fns for d in wants):
                continue
            fn, inputs, _ = shape.functions[name]
            constraints: dict[str, Any] = dict(pins.get(name, {}))
            for (f, out), (d, inp) in first_consumer.items():
                if manual and f == name:
                    constraints[out] = inp if d == name else fns[d].input_specs[inp]
            fns[name] = ctx.compile(fn, {i: sample for i in inputs},
                                    storage.path(work / name), io_spec_constraints=constraints)
            pending.remove(name)
            break
    return fns


def _compile_negotiated(ctx, shape: Shape, sample, work: Path):
    pins = shape.pins(tuple(sample.shape))
    functions = {}
    for name, (fn, inputs, kwargs) in shape.functions.items():
        extra = dict(kwargs)
        if name in pins:
            extra["io_spec_constraints"] = pins[name]
        functions[name] = (fn, {i: sample for i in inputs}, extra)
    compiled = ctx.compile_pipeline(functions, shape.edges, storage.path(work))
    return compiled.functions, compiled.plan


def _maker(rows: int) -> Callable[[], torch.Tensor]:
    """Fresh inputs, the same sequence for every variant."""
    generator = torch.Generator().manual_seed(0)
    return lambda: torch.randn(rows, COLS, generator=generator)


def measure(shape: Shape, nbytes: int, device: str, work: Path) -> dict[str, Any]:
    """Each variant's converter bytes and call cycles for one run, and the plan's model."""
    rows = max(1, nbytes // (4 * COLS))
    sample = torch.randn(rows, COLS)
    figures: dict[str, Any] = {"bytes": rows * COLS * 4}
    results = []
    for variant in VARIANTS:
        with Context(MNDevice(device)) as ctx:
            where = work / variant
            if variant == "negotiated":
                fns, plan = _compile_negotiated(ctx, shape, sample, where)
                figures["plan"] = plan["totals"]["negotiated"]["placed_cycles"]
            else:
                fns = _compile_plain(ctx, shape, sample, where, variant == "consumer-first")
            ctx.report(clear=True)
            results.append(shape.run(fns, _maker(rows)))
            calls = ctx.report().calls()
            figures[variant] = (sum(r.bytes["converter"] for r in calls),
                                sum(c.cycles for r in calls for c in r.commands
                                    if not c.command.startswith("HostWrite")))
    for other in results[1:]:  # every variant computes the same
        for got, want in zip(other, results[0], strict=True):
            torch.testing.assert_close(got, want)
    return figures


def _label(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--kib", default="1024,16384",
                        help="hand-off sizes in KiB, comma-separated (default 1 and 16 MiB)")
    parser.add_argument("--shapes", default=",".join(s.name for s in SHAPES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        sizes = [int(k) << 10 for k in args.kib.split(",")]
    except ValueError:
        parser.error(f"--kib: comma-separated integers, not {args.kib!r}")
    known = {s.name: s for s in SHAPES}
    unknown = [n for n in args.shapes.split(",") if n not in known]
    if unknown:
        parser.error(f"--shapes: unknown {','.join(unknown)} (known: {','.join(known)})")
    head = (f"{'shape':<9} {'hand-off':>8} | {'defaults B':>11} {'cycles':>9} | "
            f"{'cons-1st B':>11} {'cycles':>9} | {'negot. B':>11} {'cycles':>9} "
            f"{'plan':>9} | {'vs defaults':>11} {'vs cons-1st':>11}")
    print(f"device {args.device}: fp32 tensors of {COLS} columns; converter bytes and modeled "
          "cycles of one run's Launches and hand-offs; plan: the negotiated plan's model of "
          "them")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory() as tmp:
        for shape in (known[n] for n in args.shapes.split(",")):
            for size in sizes:
                m = measure(shape, size, args.device, Path(tmp) / shape.name / str(size))
                (db, dc), (mb, mc), (nb, nc) = (m[v] for v in VARIANTS)
                print(f"{shape.name:<9} {_label(m['bytes']):>8} | {db:>11} {dc:>9} | "
                      f"{mb:>11} {mc:>9} | {nb:>11} {nc:>9} {m['plan']:>9} | "
                      f"{dc / nc:>10.2f}x {mc / nc:>10.2f}x")


if __name__ == "__main__":
    main()
