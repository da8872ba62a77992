"""Shared fixtures: seeded randomness and fresh Contexts on the functional model."""

from __future__ import annotations

import os

import pytest
import torch

SEED = int(os.environ.get("MNCORE_TEST_SEED", "1234"))


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
