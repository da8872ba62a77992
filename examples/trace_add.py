"""Add two tensors under a Perfetto trace, then open the trace in https://ui.perfetto.dev.

The trace shows the compile, the call, each device command the call issued (host tracks, wall
clock) and the device's own timeline (host port, compute, layout converter, descriptors; in
device cycles). See docs/trace.md for what each track holds.

    ./exec_with_env.sh python3 examples/trace_add.py [DEVICE] [TRACE_FILE]

DEVICE defaults to mncore2:auto; TRACE_FILE to trace_add.pftrace in a fresh temporary folder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage, trace_event, trace_scope


def add(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"out": inputs["x"] + inputs["y"]}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    work = Path(tempfile.mkdtemp(prefix="mncore_trace_add_"))
    trace_file = Path(sys.argv[2]) if len(sys.argv) > 2 else work / "trace_add.pftrace"

    context = Context(MNDevice(device))
    x = torch.randn(32, 64)
    y = torch.randn(32, 64)

    with trace_scope(trace_file):
        compiled = context.compile(add, {"x": x, "y": y}, storage.path(work / "add"))
        with trace_event("add two tensors", rows=32, cols=64):
            result = compiled({"x": x, "y": y})["out"].cpu()

    assert torch.allclose(result, x + y)
    print(context.report().table())
    print(f"trace: {trace_file} ({trace_file.stat().st_size} bytes); open it in "
          "https://ui.perfetto.dev")
    context.close()
    print("trace_add succeeded")


if __name__ == "__main__":
    main()
