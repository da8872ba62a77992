"""Train a small GPT on a short text on the device: character tokens, a compiled AdamW step with
gradient accumulation over two micro-batches, label smoothing and ``clip_grad_norm_``; prints the
loss as it goes and the final loss.

The text is ``examples/data/tiny.txt`` (a few KB, shipped with the repository). The model's
parameters and AdamW's state are registered with the Context, so they stay in device DRAM
between calls; each call moves one batch of token windows in and the loss out. At the end,
``context.synchronize()`` brings the host model up to date and a greedy sample is printed.

    ./exec_with_env.sh python3 examples/train_gpt.py [--device mncore2:auto] [--steps 60]
        [--outdir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNCoreAdamW, MNDevice, set_buffer_name_in_optimizer, storage
from mlsdk.testing.gpt import GPT, make_gpt_step

TEXT = Path(__file__).parent / "data" / "tiny.txt"
BLOCK = 32  # tokens per window
BATCH = 8  # windows per step (two micro-batches of 4)


def _batches(tokens: torch.Tensor, steps: int, seed: int) -> list[dict[str, torch.Tensor]]:
    """Random windows of the text, each with the next token as its target."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - BLOCK - 1, (BATCH,), generator=g)
        out.append({"idx": torch.stack([tokens[s:s + BLOCK] for s in starts]),
                    "y": torch.stack([tokens[s + 1:s + BLOCK + 1] for s in starts])})
    return out


def _sample(model: GPT, prompt: torch.Tensor, count: int) -> list[int]:
    """Greedy continuation of ``prompt`` by the (synchronized) host model."""
    idx = prompt[None]
    with torch.no_grad():
        for _ in range(count):
            logits = model(idx[:, -BLOCK:])
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx[0, len(prompt):].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--outdir", type=Path, default=None,
                        help="codegen directory (default: a temporary one)")
    args = parser.parse_args()
    text = TEXT.read_text()
    chars = sorted(set(text))
    tokens = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    torch.manual_seed(0)
    model = GPT(vocab=len(chars), d=32, h=4, layers=2, block=BLOCK, sdpa=True)
    batches = _batches(tokens, args.steps, seed=0)
    outdir = args.outdir or Path(tempfile.mkdtemp(prefix="train_gpt_"))
    with Context(MNDevice(args.device)) as context:
        context.registry.register("model", model)
        opt = MNCoreAdamW(model.parameters(), lr=3e-3, weight_decay=0.01, foreach=False)
        set_buffer_name_in_optimizer(opt, "opt")
        context.register_optimizer_buffers(opt)
        step = context.compile(make_gpt_step(model, opt, micro_batches=2), batches[0],
                               storage.path(outdir / "step"))
        loss = float("nan")
        for i, batch in enumerate(batches):
            loss = step(batch)["loss"].item()
            if i % 10 == 0:
                print(f"step {i:3d}  loss {loss:.4f}")
        context.synchronize()
    sample = _sample(model, tokens[:BLOCK], 40)
    print("sample:", repr("".join(chars[t] for t in sample)))
    print(f"final loss {loss:.4f} after {args.steps} steps")


if __name__ == "__main__":
    main()
