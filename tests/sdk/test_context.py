"""Context: the current context, and a device ended when nobody closed its Context."""

from __future__ import annotations

import gc

import pytest
from mlsdk import Context, MNDevice


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


def test_a_context_nobody_closed_ends_its_device_when_collected():
    ctx = Context(MNDevice("mncore2:auto"))
    device = ctx.device
    del ctx
    gc.collect()
    assert device.closed
