"""The public API's small parts: IOSpec, TensorProxy, Context, Report, commands, allocator."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch
from mlsdk import DEVICE_STRINGS, Context, IOSpec, MNDevice, TensorProxy, storage
from mlsdk.device.allocator import ALIGN_LW, Allocator
from mlsdk.device.commands import (
    Bind,
    Buffer,
    Convert,
    HostRead,
    HostWrite,
    Launch,
    command_from_dict,
)
from mlsdk.errors import DeviceError, DeviceMemoryError
from mncore_hdl.layout import conversion, host_layout, native_layout


def double(inputs):
    return {"y": inputs["x"] * 2}


@pytest.fixture
def compiled(context, tmp_path):
    return context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "d"))


def test_iospec_prints_compares_and_serialises(compiled):
    spec = compiled.input_specs["x"]
    assert str(spec) == ("IOSpec('x': 32x64 float32 in DRAM, layout (32,64)/((32:32), "
                         "(32:1, 2_W:1)), 8192 bytes)")
    assert "layout='(32,64)/((32:32), (32:1, 2_W:1))'" in repr(spec)
    again = IOSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and hash(again) == hash(spec)
    out = compiled.output_specs["y"]
    assert out != spec
    assert not out.is_memcopyable_to(spec)
    renamed = IOSpec("other", spec.shape, spec.dtype, spec.layout)
    assert renamed != spec and renamed.is_memcopyable_to(spec)
    assert spec.nbytes == 32 * 64 * 4 and spec.location == "DRAM"
    with pytest.raises(TypeError, match="takes an IOSpec, not str"):
        spec.is_memcopyable_to("x")  # type: ignore[arg-type]


def test_tensor_proxy_exposes_spec_and_buffer(context, compiled):
    y = compiled({"x": torch.ones(32, 64)})["y"]
    assert isinstance(y, TensorProxy)
    assert y.shape == torch.Size([32, 64]) and y.dtype == torch.float32
    assert y.spec == compiled.output_specs["y"]
    assert y.buffer.nbytes == y.spec.nbytes
    assert y.buffer.groups == y.spec.layout.groups == 4
    assert y.buffer.address % ALIGN_LW == 0
    assert "TensorProxy('y', shape=(32, 64)" in repr(y)
    torch.testing.assert_close(y.cpu(), torch.full((32, 64), 2.0))


def test_every_functional_device_string_runs(tmp_path):
    for name, (backend, _) in DEVICE_STRINGS.items():
        if backend not in ("functional", "reference"):
            continue
        if name == "pfvm:cuda" and not torch.cuda.is_available():
            continue  # its error without a GPU: tests/sdk/device/test_reference.py
        with Context(MNDevice(name)) as ctx:
            f = ctx.compile(double, {"x": torch.ones(4, 4)}, storage.path(tmp_path / "f"))
            torch.testing.assert_close(f({"x": torch.ones(4, 4)})["y"].cpu(),
                                       torch.full((4, 4), 2.0))
            assert ctx.report().calls()[0].cycles_kind == (
                "modeled" if backend == "functional" else "none")


def test_switch_context():
    a = Context(MNDevice("mncore2:auto"))
    b = Context(MNDevice("pfvm:cpu"))
    try:
        previous = Context.switch_context(b)
        assert Context.current() is b
        Context.switch_context(previous or a)
        with pytest.raises(TypeError, match="takes a Context"):
            Context.switch_context("b")  # type: ignore[arg-type]
    finally:
        a.close()
        b.close()


def test_report_table_and_json(context, compiled):
    compiled({"x": torch.ones(32, 64)})["y"].cpu()
    report = context.report()
    kinds = [r.kind for r in report]
    assert kinds == ["load", "call", "read"]
    call = report.calls("double")[0]
    assert call.bytes == {"host": 8192, "compute": 16384, "converter": 0}
    assert call.cycles == sum(c.cycles for c in call.commands) > 0
    table = report.table(commands=True)
    assert "host B" in table and "HostWrite" in table and "Launch double#1" in table
    data = json.loads(report.to_json())
    assert data["device"] == "mncore2:auto"
    assert data["records"][1]["cycles_kind"] == "modeled"


def test_commands_round_trip_through_json():
    buf = Buffer(3, 1, 2, 0x40, 16)
    image = np.arange(32, dtype=np.uint64).reshape(2, 16)
    desc = conversion(host_layout((4, 8)), native_layout((4, 8)))
    commands = [HostWrite(buf, image), HostRead(buf),
                Convert(buf, "a", buf, "b", desc),
                Launch("f#1", {"x": buf}), Bind("f#1", "x", buf)]
    for command in commands:
        again = command_from_dict(json.loads(json.dumps(command.to_dict())))
        assert again == command and type(again) is type(command)
        if isinstance(command, Convert):
            assert again.descriptor == desc  # rebuilt as the typed descriptor
    assert np.array_equal(command_from_dict(commands[0].to_dict()).data, image)
    with pytest.raises(ValueError, match="Unknown device command kind 'Poke'"):
        command_from_dict({"kind": "Poke"})
    assert str(buf) == "buf#3@G1-G2:0x40+16LW"


def test_allocator_places_multi_group_buffers_at_one_address():
    alloc = Allocator(groups=4, lw_per_group=1024)
    a = alloc.allocate(1, 100)
    b = alloc.allocate(4, 10)
    assert b.group == 0 and b.groups == 4
    assert all(alloc.used_lw(g) >= 16 for g in range(4))
    c = alloc.allocate(1, 900)
    assert c.group != a.group
    alloc.free(a)
    with pytest.raises(ValueError, match="not allocated"):
        alloc.free(a)
    with pytest.raises(DeviceMemoryError, match="spanning 5 Groups"):
        alloc.allocate(5, 1)
    with pytest.raises(DeviceMemoryError, match="exhausted"):
        alloc.allocate(4, 1000)


def test_a_context_nobody_closed_ends_its_device_when_collected():
    import gc

    ctx = Context(MNDevice("mncore2:auto"))
    device = ctx.device
    del ctx
    gc.collect()
    assert device.closed


def test_public_names_load_on_demand_and_cover_all():
    """Every name of ``mlsdk.__all__`` resolves; importing the RTL driver (what the cocotb server
    in the simulator does) skips torch, the compiler and the device classes."""
    import os
    import subprocess
    import sys

    import mlsdk

    assert sorted(mlsdk.__all__) == sorted(["storage", *mlsdk._EXPORTS])
    for name in mlsdk.__all__:
        assert getattr(mlsdk, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'Contxt'"):
        mlsdk.Contxt  # noqa: B018
    code = ("import sys, mlsdk.device.rtl.driver; "
            "print('torch' in sys.modules, "
            "len([m for m in sys.modules if m.startswith('mncore_compiler')]), "
            "'mlsdk.device.base' in sys.modules, 'mlsdk.device.rtl.device' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # this checkout's packages
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    assert out == ["False", "0", "False", "False"]


def test_every_device_table_row_names_a_device_class():
    """Each row imports (without starting anything) to a concrete Device subclass."""
    from mlsdk.device.base import Device, DramDevice
    from mlsdk.device.registry import DEVICES

    assert sorted(DEVICE_STRINGS) == sorted(DEVICES)
    for name, entry in DEVICES.items():
        cls = entry.load()
        assert issubclass(cls, Device) and not inspect.isabstract(cls), name
        # The capability the Context picks the function class by.
        assert cls.has_memory == issubclass(cls, DramDevice), name
        assert DEVICE_STRINGS[name] == (entry.backend, entry.description)
    with pytest.raises(TypeError, match="Can't instantiate abstract class DramDevice"):
        DramDevice(MNDevice("mncore2:auto").config, "x")  # type: ignore[abstract]


def test_the_host_reference_has_no_device_memory():
    with Context(MNDevice("pfvm:cpu")) as ctx:
        assert ctx.device.cycles_kind == "none" and ctx.device.counters() == {}
        assert not ctx.device.has_memory
        # It implements no memory hooks at all, rather than each one raising.
        for hook in ("allocate", "execute", "dram_snapshot", "peek", "poke"):
            assert not hasattr(ctx.device, hook), hook
        with pytest.raises(DeviceError, match="pfvm:cpu runs on the host and has no device "
                                              "memory"):
            ctx.session.dram.allocate(host_layout((4, 8)))
        with pytest.raises(DeviceError, match="pfvm:cpu runs on the host and has no device "
                                              "memory"):
            ctx.session.execute(HostRead(Buffer(1, 0, 1, 0, 8)),
                                ctx.session.new_record("x.cpu()", kind="read"))
