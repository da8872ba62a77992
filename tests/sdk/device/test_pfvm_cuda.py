"""pfvm:cuda: the host reference on a CUDA GPU, and its clear error where torch sees none."""

from __future__ import annotations

import pytest
import torch
from mlsdk import DEVICE_STRINGS, Context, DeviceError, DeviceNotAvailableError, MNDevice, storage
from mlsdk.device import reference
from mlsdk.device.reference import ReferenceDevice
from mncore_hdl.arch import MNCORE2
from torch import nn

NO_GPU = not torch.cuda.is_available()


def test_listed_as_a_reference_device():
    assert DEVICE_STRINGS["pfvm:cuda"][0] == "reference"
    assert "CUDA" in DEVICE_STRINGS["pfvm:cuda"][1]
    device = MNDevice("pfvm:cuda")  # naming it is fine anywhere; opening needs a GPU
    assert device.backend == "reference" and device.base_name == "pfvm:cuda"


def test_pfvm_cuda_takes_no_options():
    with pytest.raises(ValueError, match="Device 'pfvm:cuda' takes no options"):
        MNDevice("pfvm:cuda?waves=x")


@pytest.mark.skipif(not NO_GPU, reason="torch sees a CUDA GPU here")
def test_without_a_gpu_opening_names_pfvm_cpu():
    current = Context.current()
    with pytest.raises(DeviceNotAvailableError,
                       match=r"Device 'pfvm:cuda' needs a CUDA GPU that torch can use, but "
                             r"torch sees none \(torch.cuda.is_available\(\) is False; torch "
                             r".*\); use 'pfvm:cpu', the same host reference on the CPU"):
        Context(MNDevice("pfvm:cuda"))
    assert Context.current() is current  # no half-made Context became current
    assert issubclass(DeviceNotAvailableError, DeviceError)


def test_a_gpu_is_chosen_where_torch_sees_one(monkeypatch):
    # Only the device choice: creating the reference touches no GPU memory.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    device = ReferenceDevice.create(MNCORE2, "pfvm:cuda", {})
    assert isinstance(device, ReferenceDevice)
    assert device.torch_device == torch.device("cuda")
    assert ReferenceDevice.create(MNCORE2, "pfvm:cpu", {}).torch_device == torch.device("cpu")


def test_the_reference_device_takes_a_torch_device():
    assert ReferenceDevice(MNCORE2, "pfvm:cpu").torch_device == torch.device("cpu")
    assert ReferenceDevice(MNCORE2, "x", torch.device("cpu")).torch_device.type == "cpu"
    with pytest.raises(RuntimeError):
        ReferenceDevice(MNCORE2, "x", "no-such-device")


def _mlp_run(device: str, tmp_path, x: torch.Tensor, mlp: nn.Module):
    with Context(MNDevice(device)) as ctx:
        f = ctx.compile(lambda d: {"y": mlp(d["x"])}, {"x": x}, storage.path(tmp_path / device),
                        options={"float_dtype": "mixed"})
        first = f({"x": x})["y"]
        chained = f({"x": first})["y"].cpu()  # a TensorProxy input: moved to the device
        held = first._storage.tensor  # the result, held on the torch device
        out = first.cpu()
        kind = ctx.report().calls()[0].cycles_kind
        constants = f._graph.constants
    return out, chained, held, kind, constants


def test_the_cuda_row_runs_the_same_code_on_a_given_torch_device(monkeypatch, tmp_path, seed):
    # pfvm:cuda's code path (constants moved at load, inputs at each call, results held on
    # the torch device and copied back by .cpu()) with "cpu" as its torch device.
    monkeypatch.setitem(reference.TORCH_DEVICES, "pfvm:cuda", "cpu")
    mlp = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    got, chained, held, kind, constants = _mlp_run("pfvm:cuda", tmp_path, x, mlp)
    want, want_chained, *_ = _mlp_run("pfvm:cpu", tmp_path, x, mlp)
    assert torch.equal(got, want) and torch.equal(chained, want_chained)
    assert kind == "none"
    assert got.device.type == "cpu" and got.data_ptr() != held.data_ptr()  # a copy
    assert all(t.device.type == "cpu" for t in constants.values())


@pytest.mark.skipif(NO_GPU, reason="torch sees no CUDA GPU")
def test_on_a_real_gpu(tmp_path, seed):
    mlp = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    got, chained, held, kind, constants = _mlp_run("pfvm:cuda", tmp_path, x, mlp)
    want, want_chained, *_ = _mlp_run("pfvm:cpu", tmp_path, x, mlp)
    assert held.device.type == "cuda" and got.device.type == "cpu"
    assert all(t.device.type == "cuda" for t in constants.values())
    # Different kernels may sum in another order: float32 rounding apart.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(chained, want_chained, rtol=1e-5, atol=1e-5)
    assert kind == "none"
