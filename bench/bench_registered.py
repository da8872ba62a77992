"""Registered parameters vs re-uploaded weights: host bytes and wall time per nn.Linear call.

For ``nn.Linear(1024, 1024)`` on a batch of 16 rows, two ways to run inference:

- re-uploaded: the function takes the weight and bias as inputs, and every call passes them
  from the host (how an application without registration keeps its weights current);
- registered: ``context.registry.register("model", model)``; the function closes over the
  model and reads its parameters from their device copy, uploaded once at load.

Prints host bytes (of which registered state), modeled cycles and wall time per call.

    ./exec_with_env.sh python3 bench/bench_registered.py [--device mncore2:auto] [--calls 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage

FEATURES = 1024
BATCH = 16


def _per_call(context: Context, name: str, call, calls: int) -> dict[str, float]:
    call()  # warm: the first call may upload state, and touches every buffer once
    start = time.perf_counter()
    for _ in range(calls):
        call()
    wall = (time.perf_counter() - start) / calls
    records = context.report().calls(name)[-calls:]
    return {"host": sum(r.bytes["host"] for r in records) / calls,
            "state": sum(r.state_bytes for r in records) / calls,
            "cycles": sum(r.cycles for r in records) / calls, "wall": wall}


def measure(device: str, calls: int, work: Path) -> dict[str, dict[str, float]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, FEATURES)
    x = torch.randn(BATCH, FEATURES)
    weight, bias = model.weight.detach(), model.bias.detach()

    def reuploaded(d):
        return {"y": torch.nn.functional.linear(d["x"], d["weight"], d["bias"])}

    def registered(d):
        return {"y": model(d["x"])}

    results = {}
    with Context(MNDevice(device)) as context:
        plain = context.compile(reuploaded, {"x": x, "weight": weight, "bias": bias},
                                storage.path(work / "reuploaded"))
        results["re-uploaded"] = _per_call(
            context, "reuploaded", lambda: plain({"x": x, "weight": weight, "bias": bias}),
            calls)
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        kept = context.compile(registered, {"x": x}, storage.path(work / "registered"))
        results["registered"] = _per_call(context, "registered", lambda: kept({"x": x}), calls)
        (load,) = [r for r in context.report() if r.kind == "load"]
        results["registered"]["upload once"] = load.state_bytes
    return results


def print_registered(results: dict[str, dict[str, float]], device: str, calls: int) -> None:
    print(f"nn.Linear({FEATURES}, {FEATURES}), batch {BATCH}, on {device}, {calls} calls each")
    head = f"{'weights':<12} {'host B/call':>12} {'state B/call':>13} {'cycles/call':>12} " \
           f"{'wall ms/call':>13}"
    print(head)
    print("-" * len(head))
    for name, row in results.items():
        print(f"{name:<12} {row['host']:>12.0f} {row['state']:>13.0f} {row['cycles']:>12.0f} "
              f"{row['wall'] * 1e3:>13.2f}")
    base, kept = results["re-uploaded"], results["registered"]
    print(f"registered parameters: uploaded once ({kept['upload once']:.0f} B at load); per "
          f"call {base['host'] / max(kept['host'], 1):.0f}x fewer host bytes, "
          f"{base['cycles'] / max(kept['cycles'], 1):.1f}x fewer modeled cycles, "
          f"{base['wall'] / kept['wall']:.2f}x less wall time")
    print("(wall time on a functional model is the host simulating the call: the matmul in "
          "torch, laying the uploaded weight into DRAM; cycles are the device's figure)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mncore_bench_registered_") as work:
        results = measure(args.device, args.calls, Path(work))
    print_registered(results, args.device, args.calls)


if __name__ == "__main__":
    main()
