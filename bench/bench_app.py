"""The issue's two headline figures side by side, in one run.

(a) Compile cache: a cold compile (no cache) against a cache hit, for an add, an
    ``nn.Linear(1024, 1024)`` closure and an 8-layer MLP, in this process (median of
    ``--repeat``) and in fresh processes (from ``bench_cache``).
(b) Registered parameters: ``nn.Linear(1024, 1024)`` inference that re-uploads the weight and
    bias every call against one whose registered parameters stay on the device: host bytes,
    modeled cycles and wall time per call (from ``bench_registered``).

    PYTHONPATH=sdk:compiler:hdl python bench/bench_app.py [--repeat 5] [--calls 20]

Wall times on this kit are the host simulating the device; on a shared machine they vary by
tens of percent from run to run (the cache figures are interleaved medians for that reason).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_cache import in_process, other_process, print_in_process, print_other_process
from bench_registered import measure, print_registered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="compiles per cache figure")
    parser.add_argument("--calls", type=int, default=20, help="calls per registered figure")
    parser.add_argument("--device", default="mncore2:auto")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_app_") as tmp:
        work = Path(tmp)
        print("== (a) cold compile vs cache hit ==")
        print_in_process(in_process(work / "a", args.repeat), args.repeat)
        print()
        print_other_process(other_process(work / "a"))
        print()
        print("== (b) re-uploaded vs registered parameters ==")
        print_registered(measure(args.device, args.calls, work / "b"), args.device, args.calls)
    print(f"\n(bench took {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
