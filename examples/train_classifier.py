"""Train an MLP classifier on the device: forward, cross-entropy, backward and the optimizer step
in one compiled function, called in a loop; a compiled eval step counts correct predictions.

The data is scikit-learn's ``load_digits`` (1797 8x8 images of the digits 0-9, shipped inside
the package: no download). The parameters and the optimizer's state are registered with the
Context, so they stay in device DRAM between calls: each training call moves the batch in and
the loss out, nothing else (the report's bytes per step, printed at the end). The host model
is brought up to date by ``context.synchronize()``.

    ./exec_with_env.sh python3 examples/train_classifier.py [--device mncore2:auto]
        [--optimizer adam|sgd] [--epochs 6] [--outdir DIR]

``--device torch`` trains the same model with plain torch (``torch.optim``) on the host: it
reaches the same accuracy threshold (:data:`THRESHOLD`).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from mlsdk import (
    Context,
    MNCoreAdam,
    MNCoreSGD,
    MNDevice,
    set_buffer_name_in_optimizer,
    storage,
)

Tensors = dict[str, torch.Tensor]

#: Test-set accuracy both this example and plain torch reach after the default epochs.
THRESHOLD = 0.90
BATCH = 64
EVAL_BATCH = 120  # the 360 test images in three calls


def load_data(seed: int = 0) -> tuple[Tensors, Tensors]:
    """Digits scaled to [0, 1], shuffled, split 1437 train / 360 test (int64 labels)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[order], y[order]
    return {"x": x[:1437], "y": y[:1437]}, {"x": x[1437:], "y": y[1437:]}


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def make_optimizer(kind: str, params, plain_torch: bool = False) -> torch.optim.Optimizer:
    if kind == "adam":
        return (torch.optim.Adam if plain_torch else MNCoreAdam)(params, lr=1e-2)
    return (torch.optim.SGD if plain_torch else MNCoreSGD)(params, lr=0.1, momentum=0.9)


def batches(data: Tensors, size: int, epoch: int) -> list[Tensors]:
    """The epoch's shuffled full batches (the compiled step has one batch shape)."""
    order = torch.randperm(len(data["x"]), generator=torch.Generator().manual_seed(100 + epoch))
    count = len(order) // size
    return [{k: v[order[i * size:(i + 1) * size]] for k, v in data.items()} for i in range(count)]


def eval_batches(data: Tensors) -> list[Tensors]:
    n = len(data["x"])
    return [{k: v[i:i + EVAL_BATCH] for k, v in data.items()} for i in range(0, n, EVAL_BATCH)]


def step_functions(model: torch.nn.Module, optimizer: torch.optim.Optimizer):
    """The training step and the eval step, as ordinary torch functions."""

    def train_step(inputs: Tensors) -> Tensors:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs["x"]), inputs["y"])
        loss.backward()
        optimizer.step()
        return {"loss": loss}

    def eval_step(inputs: Tensors) -> Tensors:
        predicted = model(inputs["x"]).argmax(dim=1)
        return {"correct": (predicted == inputs["y"]).sum()}

    return train_step, eval_step


def train_plain_torch(kind: str, epochs: int) -> float:
    """The same training with torch.optim on the host; returns the test accuracy."""
    train, test = load_data()
    model = make_model()
    train_step, eval_step = step_functions(model, make_optimizer(kind, model.parameters(), True))
    for epoch in range(epochs):
        for batch in batches(train, BATCH, epoch):
            train_step(batch)
    with torch.no_grad():
        correct = sum(int(eval_step(b)["correct"]) for b in eval_batches(test))
    return correct / len(test["y"])


def train_on_device(device: str, kind: str, epochs: int, outdir: Path) -> float:
    train, test = load_data()
    model = make_model()
    optimizer = make_optimizer(kind, model.parameters())
    context = Context(MNDevice(device))
    # Parameters, then optimizer state: registered before compiling, so both live on the device.
    context.registry.register("model", model)
    set_buffer_name_in_optimizer(optimizer, "optimizer")
    context.register_optimizer_buffers(optimizer)
    train_step, eval_step = step_functions(model, optimizer)

    first = batches(train, BATCH, 0)[0]
    model.train()
    compiled_train = context.compile(train_step, first, storage.path(outdir / "train_step"))
    model.eval()
    compiled_eval = context.compile(eval_step, eval_batches(test)[0],
                                    storage.path(outdir / "eval_step"))
    before = model[0].weight.detach().clone()

    start = time.perf_counter()
    steps = 0
    for epoch in range(epochs):
        losses = [compiled_train(batch)["loss"] for batch in batches(train, BATCH, epoch)]
        steps += len(losses)
        if epoch == 1:
            # A schedule: the new rate reaches the device before the next call, no recompile.
            for group in optimizer.param_groups:
                group["lr"] *= 0.5
        print(f"epoch {epoch}: mean loss {sum(p.item() for p in losses) / len(losses):.4f}")
    correct = sum(int(compiled_eval(b)["correct"].item()) for b in eval_batches(test))
    accuracy = correct / len(test["y"])
    elapsed = time.perf_counter() - start

    assert torch.equal(model[0].weight.detach(), before), "host tensors wait for synchronize()"
    context.synchronize()
    assert not torch.equal(model[0].weight.detach(), before)
    with torch.no_grad():  # the synchronized host model predicts what the device counted
        host_correct = sum(int(eval_step(b)["correct"]) for b in eval_batches(test))
    print(f"device counted {correct} correct; the synchronized host model counts {host_correct}")

    record = context.report().calls(compiled_train.name)[-1]
    print(f"{steps} training steps in {elapsed:.1f} s on {device}")
    print(f"per training step: host {record.bytes['host']} B (registered state "
          f"{record.state_bytes} B), bytes per path {record.bytes}")
    context.close()
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="mncore2:auto",
                        help="an MNDevice string, or 'torch' for plain torch on the host")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--outdir", type=Path, default=None,
                        help="where the codegen directories go (default: a temporary one)")
    args = parser.parse_args()
    if args.device == "torch":
        accuracy = train_plain_torch(args.optimizer, args.epochs)
    else:
        outdir = args.outdir or Path(tempfile.mkdtemp(prefix="mncore_train_"))
        accuracy = train_on_device(args.device, args.optimizer, args.epochs, outdir)
    print(f"test accuracy: {accuracy:.3f} (threshold {THRESHOLD})")
    if accuracy < THRESHOLD:
        raise SystemExit(f"accuracy {accuracy:.3f} is below the threshold {THRESHOLD}")


if __name__ == "__main__":
    main()
