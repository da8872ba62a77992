"""The device table (``DEVICES``): each row a concrete Device class, each functional or host
row running a compiled function."""

from __future__ import annotations

import inspect

import pytest
import torch
from mlsdk import DEVICE_STRINGS, Context, MNDevice, storage
from mlsdk.device.base import Device, DramDevice
from mlsdk.device.registry import DEVICES
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM


def double(inputs):
    return {"y": inputs["x"] * 2}


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


def test_every_device_table_row_names_a_device_class():
    """Each row imports (without starting anything) to a concrete Device subclass."""
    assert sorted(DEVICE_STRINGS) == sorted(DEVICES)
    for name, entry in DEVICES.items():
        cls = entry.load()
        assert issubclass(cls, Device) and not inspect.isabstract(cls), name
        # The capability the Context picks the function class by.
        assert cls.has_memory == issubclass(cls, DramDevice), name
        assert DEVICE_STRINGS[name] == (entry.backend, entry.description)
    with pytest.raises(TypeError, match="Can't instantiate abstract class DramDevice"):
        DramDevice(MNDevice("mncore2:auto").config, "x")  # type: ignore[abstract]


def test_rtl_device_strings_and_options():
    dev = MNDevice("mncore2:rtl?waves=/tmp/w")
    assert dev.backend == "rtl" and dev.options == {"waves": "/tmp/w"}
    assert dev.config == MNCORE2_SIM
    assert MNDevice("mncore2:icarus").config == MNCORE2_SIM
    assert MNDevice("mncore2:auto").config == MNCORE2
    with pytest.raises(ValueError, match=r"Unknown option\(s\) \[.wave.\].*known options"):
        MNDevice("mncore2:rtl?wave=x")
    with pytest.raises(ValueError, match="takes no options"):
        MNDevice("mncore2:auto?waves=x")
    with pytest.raises(ValueError, match="valid device strings are: mncore2:auto"):
        MNDevice("mncore2:rtx?waves=x")
