"""The ResNet-style CNN's inference on ``mncore2:verilator`` (its buffers in the RTL's DRAM,
moved through the memory controllers' ports) gives the same logits as on the functional model,
bit for bit, and the same report: the same commands, bytes per path, conversions, relocations
and state bytes per record (cycles are measured on one and modeled on the other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.cnn import CNN
from mlsdk.testing.flows import comparable_records, require_device

SEED = 23


def _infer(device: str, tmp: Path) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
    torch.manual_seed(SEED)
    model = CNN().eval()
    g = torch.Generator().manual_seed(SEED)
    images = [torch.randn(4, 1, 8, 8, generator=g) for _ in range(2)]
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        infer = context.compile(lambda d: {"logits": model(d["x"])}, {"x": images[0]},
                                storage.path(tmp / "infer"))
        logits = [infer({"x": x})["logits"].cpu() for x in images]
        records = comparable_records(context.report())
    return logits, records


def test_cnn_inference_on_verilator_matches_the_model(tmp_path: Path) -> None:
    require_device("mncore2:verilator")
    logits, records = _infer("mncore2:verilator", tmp_path / "rtl")
    want_logits, want_records = _infer("mncore2:auto", tmp_path / "model")
    for got, want in zip(logits, want_logits, strict=True):
        assert torch.equal(got, want)
    assert records == want_records
