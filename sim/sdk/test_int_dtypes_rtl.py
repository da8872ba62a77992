"""int64 and bool tensors through the RTL layout converter: a producer's argmax indices and
mask, handed to a consumer in another layout, are converted by the Amaranth converter exactly
as on the functional model (the converter moves 32- and 16-bit lanes whatever the dtype)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.flows import require_device

Tensors = dict[str, torch.Tensor]


def producer(d: Tensors) -> Tensors:
    return {"idx": d["x"].argmax(dim=2), "pos": d["x"] > 0}


def consumer(d: Tensors) -> Tensors:
    return {"hits": (d["idx"] == 1).sum() + d["pos"].sum(), "idx": d["idx"], "pos": d["pos"]}


def _run(device: str, tmp: Path) -> tuple[Tensors, list]:
    x = torch.randn(4, 10, 3, generator=torch.Generator().manual_seed(7))
    context = Context(MNDevice(device))
    made = context.compile(producer, {"x": x}, storage.path(tmp / "p"))
    samples = {"idx": torch.zeros(4, 10, dtype=torch.int64),
               "pos": torch.zeros(4, 10, 3, dtype=torch.bool)}
    used = context.compile(consumer, samples, storage.path(tmp / "c"))
    out = {k: v.cpu() for k, v in used(made({"x": x})).items()}
    want = consumer(producer({"x": x}))
    for name, value in want.items():
        assert out[name].dtype == value.dtype and torch.equal(out[name], value), name
    snapshot = context.device.dram_snapshot()
    record = context.report().calls("consumer")[-1]
    assert record.conversions == 2 and record.bytes["converter"] > 0
    context.close()
    return {"converter": torch.tensor(record.bytes["converter"])}, snapshot


@pytest.mark.parametrize("device", ["mncore2:rtl"])
def test_int_bool_conversion_on_rtl_matches_model(device: str, tmp_path: Path) -> None:
    require_device(device)
    rtl, rtl_dram = _run(device, tmp_path / "rtl")
    model, model_dram = _run("mncore2:auto", tmp_path / "model")
    assert torch.equal(rtl["converter"], model["converter"])
    assert len(rtl_dram) == len(model_dram)
    for group, (a, b) in enumerate(zip(rtl_dram, model_dram, strict=True)):
        assert a.keys() == b.keys(), f"Group {group}: pages {sorted(a)} vs {sorted(b)}"
        for page in a:
            assert (a[page] == b[page]).all(), f"Group {group} page {page} differs"
