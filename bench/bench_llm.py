"""Greedy decoding of a Hugging Face Llama with a compiled prefill and decode: one decode step.

For a tiny Llama (hidden 64, 2 layers, cache 32) and a larger one (hidden 512, 4 layers, context
256), prints per decode step: host wall time of the compiled step against torch eager on one
thread (the same ``llm_forward``), the step's host and converter bytes, its modeled cycles and
the tokens/s both give (a batch of prompts makes ``batch`` tokens a step).

A step's wall time is ``(generate(N) - generate(1)) / (N - 1)``: generation of N tokens less the
prefill alone, best of ``--repeat`` runs (the machine is shared; the least disturbed run).

    ./exec_with_env.sh python3 bench/bench_llm.py [--sizes tiny,large] [--tokens 16]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from mlsdk import Context, MNDevice
from mlsdk.experimental.llm.generation import CACHES, CompiledGenerator, eager_generate
from mlsdk.experimental.llm.tiny import tiny_llama
from timing import best_of

#: name -> (LlamaConfig overrides, prompt length, cache length)
SIZES: dict[str, tuple[dict[str, int], int, int]] = {
    "tiny": ({}, 8, 32),
    "large": ({"hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
               "num_attention_heads": 8, "num_key_value_heads": 4}, 32, 256),
}


def _step_wall(generate: Callable[[int], object], tokens: int, repeat: int) -> float:
    generate(tokens)  # warm-up
    return (best_of(lambda: generate(tokens), repeat, warmup=False)
            - best_of(lambda: generate(1), repeat, warmup=False)) / (
        tokens - 1)


def measure(size: str, cache: str, tokens: int, batch: int, repeat: int, device: str,
            work: Path) -> dict[str, float]:
    overrides, prompt, length = SIZES[size]
    model = tiny_llama(**overrides)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (batch, prompt), generator=g)
    mask = torch.ones_like(ids)
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        generator = CompiledGenerator(context, model, batch=batch, prompt_length=prompt,
                                      cache_length=length, codegen_dir=work / f"{size}-{cache}",
                                      cache=cache)
        compiled = _step_wall(lambda n: generator.generate(ids, mask, n), tokens, repeat)
        steps = context.report().calls("decode")[-(tokens - 1):]
        clock = context.mndevice.config.clock_mhz * 1e6
    with torch.no_grad():
        eager = _step_wall(lambda n: eager_generate(model, ids, mask, n, length, cache), tokens,
                           repeat)
    cycles = sum(s.cycles for s in steps) / len(steps)
    return {"compiled": compiled, "eager": eager,
            "host": max(s.bytes["host"] for s in steps),
            "converter": max(s.bytes["converter"] for s in steps),
            "cycles": cycles, "tokens_s": batch / compiled,
            "modeled_tokens_s": batch * clock / cycles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="tiny,large", help=f"of {', '.join(SIZES)}")
    parser.add_argument("--caches", default="shifted", help=f"of {', '.join(CACHES)}")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="mncore2:auto")
    args = parser.parse_args()
    sizes, caches = args.sizes.split(","), args.caches.split(",")
    for name, given, known in (("--sizes", sizes, SIZES), ("--caches", caches, CACHES)):
        unknown = [s for s in given if s not in known]
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)} (choose from {', '.join(known)})")
    if args.tokens < 2:
        parser.error(f"--tokens must be at least 2 (a prefill and a decode step), not "
                     f"{args.tokens}")
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="mncore_bench_llm_"))
    print(f"device {args.device}, batch {args.batch}, {args.tokens} tokens, torch on 1 thread; "
          "per decode step:")
    head = (f"{'size':<6} {'cache':<8} {'compiled ms':>12} {'eager ms':>9} {'ratio':>6} "
            f"{'host B':>7} {'conv B':>7} {'cycles':>9} {'tokens/s':>9} {'modeled tok/s':>14}")
    print(head)
    print("-" * len(head))
    for size in sizes:
        for cache in caches:
            m = measure(size, cache, args.tokens, args.batch, args.repeat, args.device, work)
            print(f"{size:<6} {cache:<8} {m['compiled'] * 1e3:>12.2f} {m['eager'] * 1e3:>9.2f} "
                  f"{m['compiled'] / m['eager']:>5.1f}x {m['host']:>7.0f} {m['converter']:>7.0f} "
                  f"{m['cycles']:>9.0f} {m['tokens_s']:>9.1f} {m['modeled_tokens_s']:>14.0f}")


if __name__ == "__main__":
    main()
