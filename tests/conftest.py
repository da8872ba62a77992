"""Shared fixtures: seeded randomness and fresh Contexts on the functional model."""

from __future__ import annotations

import pytest
import torch
from mlsdk.settings import TOOLS

SEED = TOOLS["MNCORE_TEST_SEED"].get()


@pytest.fixture
def seed(request) -> int:
    """A per-test seed (``MNCORE_TEST_SEED`` overrides the base); printed on failure."""
    value = SEED + sum(map(ord, request.node.name))
    torch.manual_seed(value)
    print(f"seed={value} (rerun with MNCORE_TEST_SEED={SEED})")
    return value


@pytest.fixture
def context():
    from mlsdk import Context, MNDevice

    ctx = Context(MNDevice("mncore2:auto"))
    yield ctx
    ctx.close()


def double(inputs):
    return {"y": inputs["x"] * 2}


@pytest.fixture
def doubled(context, tmp_path):
    """``y = 2 * x`` of one 32x64 float32 input, compiled on ``context``."""
    from mlsdk import storage

    return context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "d"))
