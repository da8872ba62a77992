"""TensorProxy: what a compiled function's result exposes (its spec, its device buffer)."""

from __future__ import annotations

import torch
from mlsdk import TensorProxy
from mlsdk.device.allocator import ALIGN_LW


def test_tensor_proxy_exposes_spec_and_buffer(doubled):
    y = doubled({"x": torch.ones(32, 64)})["y"]
    assert isinstance(y, TensorProxy)
    assert y.shape == torch.Size([32, 64]) and y.dtype == torch.float32
    assert y.spec == doubled.output_specs["y"]
    assert y.buffer.nbytes == y.spec.nbytes
    assert y.buffer.groups == y.spec.layout.groups == 4
    assert y.buffer.address % ALIGN_LW == 0
    assert "TensorProxy('y', shape=(32, 64)" in repr(y)
    torch.testing.assert_close(y.cpu(), torch.full((32, 64), 2.0))
