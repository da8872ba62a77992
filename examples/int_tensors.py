"""Evaluate a classifier on a modeled MN-Core 2: class labels in, correct predictions and loss out.

The compiled function takes float features and int64 class labels, and returns an int64 count
of correct predictions (argmax, ==, sum) and the cross-entropy loss with class-index targets.
A second function turns the per-sample predictions into a bool mask of mistakes; the int64 and
bool tensors pass from one function to the other on the device.

    ./exec_with_env.sh python3 examples/int_tensors.py            # mncore2:auto
    ./exec_with_env.sh python3 examples/int_tensors.py pfvm:cpu   # the host reference
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from mlsdk import Context, MNDevice, storage

Tensors = dict[str, torch.Tensor]
SUCCESS = "int tensors: accuracy and loss match torch"


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    model.eval()

    def evaluate(inputs: Tensors) -> Tensors:
        logits = model(inputs["x"])
        predicted = logits.argmax(dim=1)
        return {
            "correct": (predicted == inputs["labels"]).sum(),
            "loss": F.cross_entropy(logits, inputs["labels"]),
            "predicted": predicted,
        }

    def mistakes(inputs: Tensors) -> Tensors:
        wrong = inputs["predicted"] != inputs["labels"]
        return {"wrong": wrong, "count": wrong.sum()}

    x = torch.randn(64, 16)
    labels = torch.randint(0, 10, (64,))
    context = Context(MNDevice(device))
    work = Path(tempfile.mkdtemp(prefix="mncore_int_tensors_"))
    compiled = context.compile(evaluate, {"x": x, "labels": labels},
                               storage.path(work / "evaluate"))
    checker = context.compile(mistakes, {"predicted": labels, "labels": labels},
                              storage.path(work / "mistakes"))
    for name, spec in {**compiled.input_specs, **compiled.output_specs}.items():
        print(f"{name:>9}: {spec.dtype_name:>7} {list(spec.shape)} layout {spec.layout}")

    result = compiled({"x": x, "labels": labels})
    wrong = checker({"predicted": result["predicted"], "labels": labels})
    correct, loss = result["correct"].cpu(), result["loss"].cpu()
    with torch.no_grad():
        want = evaluate({"x": x, "labels": labels})
    print(f"correct predictions: {int(correct)} of {len(labels)} "
          f"(accuracy {int(correct) / len(labels):.3f}), loss {float(loss):.4f}")
    print(f"mistakes counted on the device: {int(wrong['count'].cpu())}")

    assert correct.dtype == torch.int64 and torch.equal(correct, want["correct"])
    assert torch.allclose(loss, want["loss"], atol=1e-5)
    assert torch.equal(wrong["wrong"].cpu(), want["predicted"] != labels)
    assert int(wrong["count"].cpu()) + int(correct) == len(labels)

    # An int64 value outside int32 is refused before anything reaches the device.
    bad = labels.clone()
    bad[0] = 1 << 40
    try:
        compiled({"x": x, "labels": bad})
    except ValueError as exc:
        print(f"rejected as expected: {exc}")
    else:
        raise AssertionError("an int64 label of 2**40 was accepted")
    context.close()
    print(SUCCESS)


if __name__ == "__main__":
    main()
