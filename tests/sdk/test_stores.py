"""mlsdk.stores: a proxy's data and the registry's copies, on a device with memory and on the
host reference, behind one interface each."""

from __future__ import annotations

import pytest
import torch
from mlsdk import Context, MNDevice
from mlsdk.errors import StaleTensorError
from mlsdk.stores import (
    DeviceStateStore,
    DeviceStorage,
    HostStateStore,
    HostStorage,
    proxy_storage,
    state_store,
)
from mncore_hdl.layout import native_layout

DEVICES = ("mncore2:auto", "pfvm:cpu")


def test_the_device_capabilities_pick_the_store():
    assert isinstance(state_store(True), DeviceStateStore)
    assert isinstance(state_store(False), HostStateStore)
    for device, kind in zip(DEVICES, (DeviceStateStore, HostStateStore), strict=True):
        with Context(MNDevice(device)) as context:
            assert isinstance(context.registry.store, kind)


def test_an_allocated_input_without_a_buffer_is_an_empty_host_tensor():
    storage = proxy_storage(None)
    assert isinstance(storage, HostStorage) and storage.tensor is None
    assert storage.buffer is None and storage.where() == "host"


@pytest.mark.parametrize("device", DEVICES)
def test_each_store_round_trips_a_copy(device):
    value = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with Context(MNDevice(device)) as context:
        session = context.session
        store = context.registry.store
        layout = native_layout((3, 4), "float32", session.device.config)
        copy = store.upload(session, "w", value, layout, None)
        assert torch.equal(store.read(session, "w", copy, layout, None), value)
        store.overwrite(session, "w", copy, value * 2, layout, None)
        assert torch.equal(store.read(session, "w", copy, layout, None), value * 2)
        storage = store.proxy_storage(copy)
        if device == "pfvm:cpu":
            assert isinstance(storage, HostStorage) and storage.tensor is copy
            assert copy is not value  # a snapshot: later changes to the tensor never show
        else:
            assert isinstance(storage, DeviceStorage) and storage.buffer is copy
            assert storage.finalizer(object(), session) is None  # the registry owns it
            assert session.dram.is_live(copy)
        store.drop(session, copy)
        if device != "pfvm:cpu":
            assert not session.dram.is_live(copy)


@pytest.mark.parametrize("device", DEVICES)
def test_a_proxy_reads_and_writes_through_its_storage(device, tmp_path):
    from mlsdk import storage as codegen

    x = torch.randn(4, 8)
    with Context(MNDevice(device)) as context:
        f = context.compile(lambda d: {"y": d["x"] * 2}, {"x": x},
                            codegen.path(tmp_path / "f"))
        (proxy,) = f.allocate_input_proxy().values()
        with pytest.raises(StaleTensorError, match="holds no data yet"):
            proxy.cpu()
        proxy.load_from(x)
        assert torch.equal(proxy.cpu(), x)
        assert (proxy.buffer is None) == (device == "pfvm:cpu")
        assert torch.equal(f({"x": proxy})["y"].cpu(), x * 2)
        proxy.free()
        with pytest.raises(StaleTensorError):
            proxy.cpu()
