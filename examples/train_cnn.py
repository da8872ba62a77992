"""Train a small ResNet-style CNN on the digits images on the device: convolutions, batch norm
in train mode, max pooling, a residual block, global average pooling, cross-entropy, backward
and SGD with momentum in one compiled step; a compiled eval step counts correct predictions.

The data is scikit-learn's ``load_digits`` as ``examples/train_classifier.py`` loads it, each
image as a 1x8x8 tensor. Parameters, batch-norm statistics and momentum live in device DRAM
between calls; ``context.synchronize()`` brings the host model up to date.

    ./exec_with_env.sh python3 examples/train_cnn.py [--device mncore2:auto] [--epochs 5]
        [--outdir DIR]

``--device torch`` trains the same model with plain torch on the host.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from mlsdk import Context, MNCoreSGD, MNDevice, set_buffer_name_in_optimizer, storage
from train_classifier import BATCH, Tensors, batches, eval_batches, load_data, step_functions

#: Test-set accuracy both the device and plain torch reach after the default epochs.
THRESHOLD = 0.90


class Residual(nn.Module):
    """Two 3x3 convolutions with batch norm, added to the block's input."""

    def __init__(self, width: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


def make_model(width: int = 8, seed: int = 0) -> nn.Module:
    """1x8x8 -> conv, BN, ReLU, max pool -> residual block -> stride-2 conv -> pool -> linear."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.MaxPool2d(2), Residual(width),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 10),
    )


def images(data: Tensors) -> Tensors:
    """The flat 64-pixel rows as [N, 1, 8, 8] images."""
    return {"x": data["x"].reshape(-1, 1, 8, 8).contiguous(), "y": data["y"]}


def train(device: str, epochs: int, outdir: Path) -> float:
    """Train for ``epochs`` on ``device`` (``"torch"``: plain torch); return the test accuracy."""
    train_data, test_data = (images(d) for d in load_data())
    model = make_model()
    plain = device == "torch"
    optimizer = (torch.optim.SGD if plain else MNCoreSGD)(model.parameters(), lr=0.1,
                                                          momentum=0.9)
    train_step, eval_step = step_functions(model, optimizer)
    tests = eval_batches(test_data)
    context = None if plain else Context(MNDevice(device))
    if context is not None:
        context.registry.register("model", model)
        set_buffer_name_in_optimizer(optimizer, "optimizer")
        context.register_optimizer_buffers(optimizer)
        model.train()
        train_step = context.compile(train_step, batches(train_data, BATCH, 0)[0],
                                     storage.path(outdir / "train_step"))
        model.eval()
        eval_step = context.compile(eval_step, tests[0], storage.path(outdir / "eval_step"))
    for epoch in range(epochs):
        model.train()
        losses = [float(train_step(b)["loss"].item()) for b in batches(train_data, BATCH, epoch)]
        print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")
    model.eval()
    with torch.no_grad():
        correct = sum(int(eval_step(b)["correct"].item()) for b in tests)
    if context is not None:
        context.synchronize()
        context.close()
    return correct / len(test_data["y"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="mncore2:auto",
                        help="an MNDevice string, or 'torch' for plain torch on the host")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--outdir", type=Path, default=None,
                        help="where the codegen directories go (default: a temporary one)")
    args = parser.parse_args()
    outdir = args.outdir or Path(tempfile.mkdtemp(prefix="mncore_cnn_"))
    accuracy = train(args.device, args.epochs, outdir)
    print(f"test accuracy: {accuracy:.3f} (threshold {THRESHOLD})")
    if accuracy < THRESHOLD:
        raise SystemExit(f"accuracy {accuracy:.3f} is below the threshold {THRESHOLD}")


if __name__ == "__main__":
    main()
