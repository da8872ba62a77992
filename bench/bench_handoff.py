"""Hand-off cost on the functional model, and host overhead of a compiled call.

For fp32 tensors from 4 KiB to 64 MiB, prints:
- modeled cycles of the consumer's hand-off: relocation (Bind) vs conversion (Convert), and of
  the whole consumer call in both cases;
- host wall time per compiled producer call against torch eager on the same function.

    ./exec_with_env.sh python3 bench/bench_handoff.py [--max-mib 64] [--device mncore2:auto]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from timing import best_of

COLS = 256


def producer(inputs):
    return {"shared": inputs["x"] * 2}


def consumer(inputs):
    return {"result": inputs["shared"] + 1}


def _handoff_cycles(context, call) -> tuple[int, int]:
    """Cycles of the Bind/Convert commands of a consumer call, and of the whole call."""
    record = context.report().calls(call)[-1]
    staging = sum(r.cycles for r in record.commands if not r.command.startswith("Launch"))
    return staging, record.cycles


def measure(nbytes: int, device: str, work: Path) -> dict[str, float]:
    rows = max(1, nbytes // (4 * COLS))
    sample = torch.randn(rows, COLS)
    with Context(MNDevice(device)) as ctx:
        cons = ctx.compile(consumer, {"shared": sample}, storage.path(work / "c"))
        fast = ctx.compile(producer, {"x": sample}, storage.path(work / "p1"),
                           io_spec_constraints={"shared": cons.input_specs["shared"]})
        slow = ctx.compile(producer, {"x": sample}, storage.path(work / "p2"))
        cons(fast({"x": sample}))
        reloc, reloc_call = _handoff_cycles(ctx, "consumer")
        cons(slow({"x": sample}))
        conv, conv_call = _handoff_cycles(ctx, "consumer")
        repeat = max(1, min(20, (4 << 20) // nbytes))
        compiled = best_of(lambda: fast({"x": sample}), repeat)
    eager = best_of(lambda: producer({"x": sample}), repeat)
    return {"bytes": rows * COLS * 4, "reloc": reloc, "conv": conv, "reloc_call": reloc_call,
            "conv_call": conv_call, "compiled_s": compiled, "eager_s": eager}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--max-mib", type=int, default=64)
    args = parser.parse_args()
    # One thread for the compiled call and for eager alike, as bench_functional.py: on a
    # shared 2-core machine more threads measure contention, not the call.
    torch.set_num_threads(1)
    sizes = [4 << 10]
    while sizes[-1] * 4 <= args.max_mib << 20:
        sizes.append(sizes[-1] * 4)
    head = (f"{'size':>8} {'reloc cyc':>10} {'conv cyc':>10} {'conv/reloc':>10} "
            f"{'call+reloc':>11} {'call+conv':>11} {'compiled ms':>12} {'eager ms':>9} "
            f"{'overhead':>9}")
    print(f"device {args.device}: fp32 tensors of {COLS} columns; cycles are "
          f"{'modeled' if args.device != 'pfvm:cpu' else 'none'}; torch threads 1, best of n; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            m = measure(size, args.device, Path(tmp))
            label = f"{m['bytes'] // 1024} KiB" if m["bytes"] < 1 << 20 else \
                f"{m['bytes'] >> 20} MiB"
            ratio = m["conv"] / m["reloc"] if m["reloc"] else float("nan")
            print(f"{label:>8} {m['reloc']:>10} {m['conv']:>10} {ratio:>10.0f} "
                  f"{m['reloc_call']:>11} {m['conv_call']:>11} {m['compiled_s'] * 1e3:>12.3f} "
                  f"{m['eager_s'] * 1e3:>9.3f} {m['compiled_s'] / m['eager_s']:>8.0f}x")


if __name__ == "__main__":
    main()
