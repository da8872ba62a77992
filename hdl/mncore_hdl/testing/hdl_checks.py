"""Helpers shared by the Amaranth unit tests of the hardware blocks."""

from __future__ import annotations

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

__all__ = ["expect_error"]


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
