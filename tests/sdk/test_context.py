"""Context: the current context, a device ended when nobody closed its Context, and
``Context.compile(num_compiler_threads=...)``."""

from __future__ import annotations

import gc

import pytest
import torch
from mlsdk import Context, MNDevice, storage


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


@pytest.mark.parametrize("threads", [-1, 1, 8])
def test_num_compiler_threads_is_accepted(context, tmp_path, threads):
    fn = context.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(3)},
                         storage.path(tmp_path / "f"), num_compiler_threads=threads)
    assert torch.equal(fn({"x": torch.ones(3)})["y"].cpu(), torch.full((3,), 2.0))


@pytest.mark.parametrize("threads", [0, -2, 1.5, True, "4"])
def test_num_compiler_threads_is_validated(context, tmp_path, threads):
    with pytest.raises(ValueError, match=f"positive int, not {threads!r}"):
        context.compile(lambda d: {"y": d["x"]}, {"x": torch.ones(3)},
                        storage.path(tmp_path / "f"), num_compiler_threads=threads)
