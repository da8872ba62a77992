"""Training steps per second: a compiled training step on the device vs plain torch.

The model, batch and optimizer of ``examples/train_classifier.py`` (an MLP on 8x8 digits,
batch 64, Adam or SGD with momentum). The device path compiles forward, cross-entropy,
backward and the optimizer step into one function, its parameters and optimizer state
registered (they stay in device DRAM); plain torch runs the same step eagerly on the host.
Prints steps per second for both and, from ``Context.report()``, the bytes per step on each
path (host port: the batch in and the loss out; registered state: nothing after the load).

Both paths run torch on ``--threads`` threads (default 1, as ``bench_functional.py``): on a
small shared machine torch's default of one thread per core makes this tiny model's eager
steps spin on each other (measured: ~20 steps/s with 2 threads vs ~2000 with 1 on 2 busy
cores), which would measure the machine's load rather than the step.

    ./exec_with_env.sh python3 bench/bench_training.py [--device mncore2:auto] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, set_buffer_name_in_optimizer, storage
from mlsdk.paths import repo_root

sys.path.insert(0, str(repo_root() / "examples"))
from train_classifier import (  # noqa: E402
    BATCH,
    batches,
    load_data,
    make_model,
    make_optimizer,
    step_functions,
)


def bench_torch(kind: str, data: list[dict[str, torch.Tensor]], steps: int) -> float:
    model = make_model()
    train_step, _ = step_functions(model, make_optimizer(kind, model.parameters(), True))
    train_step(data[0])  # warm
    start = time.perf_counter()
    for i in range(steps):
        train_step(data[i % len(data)])
    return steps / (time.perf_counter() - start)


def bench_device(device: str, kind: str, data: list[dict[str, torch.Tensor]], steps: int,
                 outdir: Path) -> tuple[float, dict[str, float], float]:
    model = make_model()
    optimizer = make_optimizer(kind, model.parameters())
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        set_buffer_name_in_optimizer(optimizer, "optimizer")
        context.register_optimizer_buffers(optimizer)
        train_step, _ = step_functions(model, optimizer)
        compiled = context.compile(train_step, data[0], storage.path(outdir / "train_step"))
        compiled(data[0])["loss"].item()  # warm
        context.report(clear=True)
        start = time.perf_counter()
        for i in range(steps):
            loss = compiled(data[i % len(data)])["loss"]
        loss.item()
        rate = steps / (time.perf_counter() - start)
        calls = context.report().calls(compiled.name)
        paths: dict[str, float] = {}
        for record in calls:
            for path, nbytes in record.bytes.items():
                paths[path] = paths.get(path, 0) + nbytes / len(calls)
        state = sum(r.state_bytes for r in calls) / len(calls)
    return rate, paths, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both paths (default 1)")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, not {args.threads}")
    torch.set_num_threads(args.threads)
    train, _ = load_data()
    data = batches(train, BATCH, 0)
    torch_rate = bench_torch(args.optimizer, data, args.steps)
    with tempfile.TemporaryDirectory(prefix="mncore_bench_training_") as tmp:
        rate, paths, state = bench_device(args.device, args.optimizer, data, args.steps,
                                          Path(tmp))
    print(f"MLP 64-64-10, batch {BATCH}, {args.optimizer}, {args.steps} steps; torch threads "
          f"{torch.get_num_threads()} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f})")
    print(f"{'path':<28}{'steps/s':>10}")
    print(f"{'plain torch (host)':<28}{torch_rate:>10.1f}")
    print(f"{args.device + ' (compiled)':<28}{rate:>10.1f}")
    print(f"bytes per step on {args.device}: "
          + ", ".join(f"{path} {nbytes:.0f} B" for path, nbytes in paths.items())
          + f"; of the host bytes, registered state: {state:.0f} B")


if __name__ == "__main__":
    main()
