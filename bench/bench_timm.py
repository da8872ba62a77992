"""How closely run_timm-style training on mncore2:auto follows torch eager, per reproduced
timm family (``mlsdk.testing.timm``) and training path: the first and last loss, the largest
relative loss difference over the steps and the largest parameter difference after them (the
figures ``tests/models/test_timm_families.py`` states). Prints a table; asserts nothing."""

from __future__ import annotations

import argparse
import copy
import tempfile

import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.timm import (
    FAMILIES,
    NUM_CLASSES,
    PATHS,
    compiled_step,
    optimizers,
    train_step,
)


def measure(family: str, path: str, steps: int, seed: int) -> tuple[float, float, float, float]:
    """(first loss, last loss, max relative loss difference, max |parameter difference|)."""
    torch.manual_seed(seed)
    size = {"image": 16} if family == "deit" else {}
    model = FAMILIES[family](drop=0.0, **size).train()
    reference = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed + 2)
    sample = {"images": torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(seed)),
              "labels": torch.randint(0, NUM_CLASSES, (2,), generator=g)}
    with Context(MNDevice("mncore2:auto")) as context, tempfile.TemporaryDirectory() as tmp:
        opt, ref_opt = optimizers(path, context, model, reference)
        step = compiled_step(path, context, model, opt, sample, storage.path(tmp) / "step")
        ref_step = train_step(reference, ref_opt)
        rel, losses = 0.0, []
        for index in range(steps):
            loss = step(sample, index)["loss"].cpu().item()
            ref = ref_step(sample)["loss"].item()
            rel = max(rel, abs(loss - ref) / abs(ref))
            losses.append(loss)
        context.synchronize()
    diff = 0.0
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        d = (p.detach() - q.detach()).abs().flatten()
        if name.endswith("attn.qkv.bias") and path == "adamw":  # the key bias: see the test
            w = d.shape[0] // 3
            d = torch.cat([d[:w], d[2 * w:]])
        diff = max(diff, d.max().item())
    return losses[0], losses[-1], rel, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", nargs="+", default=sorted(FAMILIES), choices=sorted(FAMILIES))
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    print(f"{'family':13s} {'path':17s} {'first':>8s} {'last':>8s} {'loss rel':>9s} "
          f"{'param abs':>9s}")
    for path in args.paths:
        for family in args.families:
            first, last, rel, diff = measure(family, path, args.steps, args.seed)
            print(f"{family:13s} {path:17s} {first:8.4f} {last:8.4f} {rel:9.1e} {diff:9.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
