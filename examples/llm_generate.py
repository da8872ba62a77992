"""Greedy generation with a Hugging Face Llama on a modeled MN-Core 2: prefill and decode compiled.

The flow of MLSDK's LLM inference example: the model's parameters are registered once, one
``forward(inputs)`` over ``input_ids``, ``attention_mask``, ``position_ids`` and the stacked
``past_key_values`` returns the last token's logits (and their argmax) and the shifted next cache
(``mlsdk.experimental.llm.generation.llm_forward``: the 4-D mask from
``prepare_4d_causal_attention_mask_with_cache_position``, the cache through
``kv_cache_to_legacy`` and ``kv_cache_to_tensor``), and it is compiled twice: for prefill
(prompts left-padded to a fixed length) and for decode (one token). The decode step's cache
output is compiled into its own cache input's layout (a loop-carried ``io_spec_constraints``),
so from one step to the next the cache is relocated, never copied; token, positions and mask are
loaded into input proxies. The ids are checked against
``model.generate`` on the same random weights (a tiny config: nothing is downloaded).

    ./exec_with_env.sh python3 examples/llm_generate.py --device mncore2:auto --tokens 16
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.experimental.llm.generation import llm_forward
from mlsdk.experimental.llm.tiny import tiny_llama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--tokens", type=int, default=16, help="new tokens to generate")
    parser.add_argument("--prompt", type=int, default=8, help="prompt length (left-padded)")
    parser.add_argument("--cache", type=int, default=32, help="KV cache window")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    model = tiny_llama()
    context = Context(MNDevice(args.device))
    context.registry.register("model", model)
    ids = torch.randint(3, 256, (2, args.prompt), generator=torch.Generator().manual_seed(0))
    prompt_mask = torch.ones_like(ids)
    ids[0, :3], prompt_mask[0, :3] = 0, 0  # the shorter prompt, left-padded
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    empty = torch.zeros(config.num_hidden_layers, 2, 2, config.num_key_value_heads, args.cache,
                        head_dim)
    prefill_inputs = {"input_ids": ids,
                      "attention_mask": torch.cat([torch.zeros(2, args.cache, dtype=torch.int64),
                                                   prompt_mask], 1),
                      "position_ids": (prompt_mask.cumsum(-1) - 1).clamp(min=0),
                      "past_key_values": empty}
    position = prompt_mask.sum(-1, keepdim=True) - 1
    window = prefill_inputs["attention_mask"][:, -args.cache:]
    decode_inputs = {"input_ids": ids[:, :1], "position_ids": position,
                     "attention_mask": torch.cat([window, torch.ones(2, 1, dtype=torch.int64)], 1),
                     "past_key_values": empty}

    work = Path(tempfile.mkdtemp(prefix="mncore_llm_"))
    decode = context.compile(llm_forward(model, name="decode"), decode_inputs,
                             storage.path(work / "decode"),
                             io_spec_constraints={"next_past_key_values": "past_key_values"})
    prefill = context.compile(
        llm_forward(model, name="prefill"), prefill_inputs, storage.path(work / "prefill"),
        io_spec_constraints={"next_past_key_values": decode.input_specs["past_key_values"]})

    out = prefill(prefill_inputs)
    proxies = decode.allocate_input_proxy()
    proxies.pop("past_key_values").free()  # the cache comes from the step before
    tokens = [out["next_token"].cpu()]
    for _ in range(args.tokens - 1):
        position = position + 1
        mask = torch.cat([window, torch.ones(2, 1, dtype=torch.int64)], 1)
        window = mask[:, 1:]
        step = {"input_ids": tokens[-1], "position_ids": position, "attention_mask": mask}
        for name, value in step.items():
            proxies[name].load_from(value)
        out = decode({**{name: proxies[name] for name in step},
                      "past_key_values": out["next_past_key_values"]})
        tokens.append(out["next_token"].cpu())
    generated = torch.cat(tokens, 1)

    with torch.no_grad():
        want = model.generate(input_ids=ids, attention_mask=prompt_mask,
                              max_new_tokens=args.tokens, do_sample=False, pad_token_id=0,
                              eos_token_id=None)[:, args.prompt:]
    for row, (got, ref) in enumerate(zip(generated.tolist(), want.tolist(), strict=True)):
        print(f"row {row}: generated {got}")
        print(f"row {row}: generate() {ref}  {'equal' if got == ref else 'DIFFERENT'}")
    steps = context.report().calls("decode")
    print(f"decode steps: {len(steps)}, host bytes "
          f"{sorted({s.bytes['host'] for s in steps})}, converter bytes "
          f"{sorted({s.bytes['converter'] for s in steps})}, relocations per step "
          f"{sorted({s.relocations for s in steps})}")
    if not torch.equal(generated, want):
        raise SystemExit("the compiled generation differs from model.generate")


if __name__ == "__main__":
    main()
