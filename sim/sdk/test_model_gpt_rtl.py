"""One compiled GPT training step (two micro-batches whose gradients accumulate,
``clip_grad_norm_``, label smoothing, AdamW) on ``mncore2:verilator`` gives what the functional
model gives, bit for bit: the loss, the parameters and optimizer state read back by
``Context.synchronize()``, the DRAM left behind, and the report (the same commands, bytes per
path, conversions, relocations and state bytes per record; cycles are measured on one and
modeled on the other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from mlsdk import Context, MNCoreAdamW, MNDevice, set_buffer_name_in_optimizer, storage
from mlsdk.testing.flows import comparable_records, require_device
from mlsdk.testing.gpt import GPT, make_gpt_step

SEED = 23


def _train_step(device: str, tmp: Path) -> tuple[torch.Tensor, dict[str, torch.Tensor], Any,
                                                  list[dict[str, Any]]]:
    torch.manual_seed(SEED)
    model = GPT(vocab=64, d=32, h=4, layers=1, block=8)
    g = torch.Generator().manual_seed(SEED)
    batch = {"idx": torch.randint(0, 64, (4, 8), generator=g),
             "y": torch.randint(0, 64, (4, 8), generator=g)}
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        opt = MNCoreAdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
        set_buffer_name_in_optimizer(opt, "opt")
        context.register_optimizer_buffers(opt)
        step = context.compile(make_gpt_step(model, opt), batch, storage.path(tmp / "step"))
        loss = step(batch)["loss"].cpu()
        context.synchronize()
        dram = context.device.dram_snapshot()
        records = comparable_records(context.report())
    state = {name: t.detach().clone() for name, t in model.state_dict().items()}
    for name, p in model.named_parameters():
        for key, value in opt.state[p].items():
            if isinstance(value, torch.Tensor):
                state[f"opt.{name}.{key}"] = value.detach().clone()
    return loss, state, dram, records


def test_gpt_training_step_on_verilator_matches_the_model(tmp_path: Path) -> None:
    require_device("mncore2:verilator")
    loss, state, dram, records = _train_step("mncore2:verilator", tmp_path / "rtl")
    want_loss, want_state, want_dram, want_records = _train_step("mncore2:auto",
                                                                 tmp_path / "model")
    assert torch.equal(loss, want_loss)
    assert list(state) == list(want_state)
    for (name, got), want in zip(state.items(), want_state.values(), strict=True):
        assert torch.equal(got, want), name
    assert records == want_records
    assert len(dram) == len(want_dram)
    for group, (got, want) in enumerate(zip(dram, want_dram, strict=True)):
        assert got.keys() == want.keys(), f"Group {group}: pages differ"
        for page in got:
            assert (got[page] == want[page]).all(), f"Group {group}, page {page:#x}"
