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
