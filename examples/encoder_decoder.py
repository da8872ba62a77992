"""Whisper's encoder to decoder on a modeled MN-Core 2: the encoder's output is relocated.

The decoder is compiled first; the encoder is compiled with ``io_spec_constraints`` taken from
the decoder's cross-attention input (``encoder_hidden_states``), so it writes its output in the
layout the decoder reads, and handing it over is a relocation: the report shows relocations and
a converter that stayed idle. Then greedy decoding: the decoder, compiled once over a fixed
number of positions (it is causal, so position ``t`` reads ids up to ``t`` only), is called
once per new token, each time with the encoder's output bound again. The ids are checked
against the same loop in torch eager (a tiny random Whisper: nothing is downloaded).

    ./exec_with_env.sh python3 examples/encoder_decoder.py --device mncore2:auto --tokens 6
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.experimental.llm.tiny import tiny_whisper

Tensors = dict[str, torch.Tensor]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--tokens", type=int, default=6, help="new tokens to generate")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    model = tiny_whisper()
    context = Context(MNDevice(args.device))
    context.registry.register("model", model)
    features = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(0))
    length = args.tokens + 1
    start = model.config.decoder_start_token_id

    def encode(inputs: Tensors) -> Tensors:
        hidden = model.model.encoder(inputs["input_features"]).last_hidden_state
        return {"encoder_hidden_states": hidden}

    def decode(inputs: Tensors) -> Tensors:
        out = model(encoder_outputs=(inputs["encoder_hidden_states"],),
                    decoder_input_ids=inputs["decoder_input_ids"])
        return {"next_ids": out.logits.argmax(-1)}

    with torch.no_grad():
        hidden = encode({"input_features": features})["encoder_hidden_states"]
    work = Path(tempfile.mkdtemp(prefix="mncore_whisper_"))
    ids = torch.full((1, length), start, dtype=torch.int64)
    decoder = context.compile(decode, {"encoder_hidden_states": hidden, "decoder_input_ids": ids},
                              storage.path(work / "decoder"))
    wanted = decoder.input_specs["encoder_hidden_states"]
    encoder = context.compile(encode, {"input_features": features}, storage.path(work / "encoder"),
                              io_spec_constraints={"encoder_hidden_states": wanted})
    handed = encoder({"input_features": features})["encoder_hidden_states"]

    expected = ids.clone()
    for t in range(args.tokens):
        out = decoder({"encoder_hidden_states": handed, "decoder_input_ids": ids})
        ids = ids.clone()
        ids[0, t + 1] = out["next_ids"].cpu()[0, t]
        with torch.no_grad():
            expected[0, t + 1] = decode({"encoder_hidden_states": hidden,
                                         "decoder_input_ids": expected})["next_ids"][0, t]

    print(f"decoder's cross-attention input spec: {wanted}")
    print(f"generated ids: {ids[0, 1:].tolist()}")
    print(f"eager ids:     {expected[0, 1:].tolist()}  "
          f"{'equal' if torch.equal(ids, expected) else 'DIFFERENT'}")
    calls = context.report().calls("decode")
    print(f"decoder calls: {len(calls)}, relocations {sum(c.relocations for c in calls)}, "
          f"conversions {sum(c.conversions for c in calls)}, converter bytes "
          f"{sum(c.bytes['converter'] for c in calls)}")
    if not torch.equal(ids, expected):
        raise SystemExit("the compiled decoding differs from torch eager")


if __name__ == "__main__":
    main()
