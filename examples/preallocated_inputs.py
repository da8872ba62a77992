"""Pre-allocated input proxies: stage every input on the device before the call.

A small two-layer perceptron takes its input batch and its weights as inputs. The program
allocates one TensorProxy per input (``allocate_input_proxy()``), loads the weights once and a
fresh batch each step (``load_from``), and calls the function with the proxies: the call binds
their buffers (relocations) and moves no host bytes; each batch's upload is its own ``write``
record in the report.

    ./exec_with_env.sh python3 examples/preallocated_inputs.py [device]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage

Tensors = dict[str, torch.Tensor]

BATCH, FEATURES, HIDDEN, CLASSES = 16, 32, 64, 8


def mlp(inputs: Tensors) -> Tensors:
    hidden = torch.relu(inputs["x"] @ inputs["w1"] + inputs["b1"])
    logits = hidden @ inputs["w2"] + inputs["b2"]
    return {"logits": logits, "energy": (logits * logits).mean()}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    torch.manual_seed(0)
    weights = {"w1": torch.randn(FEATURES, HIDDEN) / FEATURES ** 0.5,
               "b1": torch.zeros(HIDDEN),
               "w2": torch.randn(HIDDEN, CLASSES) / HIDDEN ** 0.5,
               "b2": torch.zeros(CLASSES)}
    sample = {"x": torch.randn(BATCH, FEATURES), **weights}

    context = Context(MNDevice(device))
    codegen = Path(tempfile.mkdtemp(prefix="mncore_preallocated_")) / "mlp"
    compiled_mlp = context.compile(mlp, sample, storage.path(codegen))

    inputs = compiled_mlp.allocate_input_proxy()
    for name, tensor in weights.items():
        inputs[name].load_from(tensor)  # the weights: once

    batch = torch.empty(BATCH, FEATURES)
    for step in range(4):
        batch.normal_()
        # clone=False: this model copies at once, so refilling `batch` next step is safe.
        inputs["x"].load_from(batch, clone=False)
        outputs = compiled_mlp(inputs)
        logits = outputs["logits"].cpu()
        energy = outputs["energy"].item()
        expected = mlp({"x": batch, **weights})
        torch.testing.assert_close(logits, expected["logits"], rtol=1e-4, atol=1e-4)
        assert abs(energy - expected["energy"].item()) <= 1e-4 * max(1.0, abs(energy))
        call = context.report().calls("mlp")[-1]
        assert call.bytes["host"] == 0, call
        print(f"step {step}: energy {energy:.4f}, call host bytes {call.bytes['host']}, "
              f"relocations {call.relocations}")

    writes = [r for r in context.report() if r.kind == "write"]
    written = sum(r.bytes["host"] for r in writes)
    print(f"{len(writes)} load_from write(s), {written} host bytes written ahead of the calls")
    print(context.report().table())
    context.close()
    print("preallocated inputs succeeded")


if __name__ == "__main__":
    main()
