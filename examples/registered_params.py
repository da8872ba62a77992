"""nn.Linear inference with registered parameters: the weights stay on the device across calls.

Part 1 registers a model with ``context.registry.register("model", model)`` and compiles a
function that closes over it: the first load uploads the parameters once; later calls move only
their input (the report's ``state B`` column is zero for them). A second function over the same
model shares the same device copy. Part 2 puts two models of the same shape in one Context under
two names: each function reads its own model's parameters.

    ./exec_with_env.sh python3 examples/registered_params.py [device]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage

Tensors = dict[str, torch.Tensor]


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    torch.manual_seed(0)
    context = Context(MNDevice(device))
    work = Path(tempfile.mkdtemp(prefix="mncore_registered_"))
    sample = torch.randn(16, 128)

    # Part 1: one registered model, called twice, and shared by a second function.
    model = torch.nn.Linear(128, 64)
    model.eval()
    context.registry.register("model", model)

    def infer(inputs: Tensors) -> Tensors:
        return {"y": model(inputs["x"])}

    def infer_relu(inputs: Tensors) -> Tensors:
        return {"y": torch.relu(model(inputs["x"]))}

    compiled = context.compile(infer, {"x": sample}, storage.path(work / "infer"))
    compiled_relu = context.compile(infer_relu, {"x": sample}, storage.path(work / "relu"))
    with torch.no_grad():
        for step in range(3):
            x = torch.randn(16, 128)
            y = compiled({"x": x})["y"].cpu()
            torch.testing.assert_close(y, model(x), rtol=1e-5, atol=1e-5)
            print(f"call {step}: matches torch")
        y = compiled_relu({"x": x})["y"].cpu()
        torch.testing.assert_close(y, torch.relu(model(x)), rtol=1e-5, atol=1e-5)

    report = context.report()
    calls = report.calls()
    state = sum(r.state_bytes for r in report)
    print(f"registered state uploaded: {state} B in total; per call: "
          f"{[r.state_bytes for r in calls]} B of state, "
          f"{[r.bytes['host'] - r.state_bytes for r in calls]} B of inputs")
    assert all(r.state_bytes == 0 for r in calls)

    # Part 2: two models of one shape in one Context, kept apart by their names.
    first, second = torch.nn.Linear(128, 64), torch.nn.Linear(128, 64)
    context.registry.register("first", first)
    context.registry.register("second", second)
    run_first = context.compile(lambda d: {"y": first(d["x"])}, {"x": sample},
                                storage.path(work / "first"))
    run_second = context.compile(lambda d: {"y": second(d["x"])}, {"x": sample},
                                 storage.path(work / "second"))
    with torch.no_grad():
        torch.testing.assert_close(run_first({"x": sample})["y"].cpu(), first(sample),
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(run_second({"x": sample})["y"].cpu(), second(sample),
                                   rtol=1e-5, atol=1e-5)
    print("two models in one Context: each function reads its own parameters")
    print(context.report().table())
    context.close()
    print("registered_params: OK")


if __name__ == "__main__":
    main()
