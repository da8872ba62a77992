"""Helpers shared by the Amaranth unit tests of the hardware blocks."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from ..paths import SOURCE_ROOT

__all__ = ["expect_error", "imports_without_amaranth"]


def expect_error(exc, msg, fn, *args):
    """``fn(*args)`` raises ``exc`` with exactly ``msg`` (the half-built object is not reported
    as an unused elaboratable)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc) as info:
            fn(*args)
        text = str(info.value)
        del info
        gc.collect()
    assert text == msg


def imports_without_amaranth(*modules: str) -> None:
    """Importing ``modules`` in a fresh interpreter (this checkout's ``mncore_hdl`` first on its
    path) loads no Amaranth module."""
    hdl = str(SOURCE_ROOT)  # this checkout's source root, not another
    code = (f"import sys; import {', '.join(modules)}; "
            "assert not any(m.startswith('amaranth') for m in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([hdl, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
