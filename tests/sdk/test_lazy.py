"""The package's public names load on first use (``mlsdk._lazy.lazy_exports``, PEP 562)."""

from __future__ import annotations

import os
import subprocess
import sys

import mlsdk
import pytest


def test_public_names_load_on_demand_and_cover_all():
    """Every name of ``mlsdk.__all__`` resolves; importing the RTL driver (what the cocotb server
    in the simulator does) skips torch, the compiler and the device classes."""
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
