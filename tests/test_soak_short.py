"""A few seconds of the soak (mlsdk.testing.soak, bench/soak.py) on the functional model:
random streams, zero mismatches."""

from __future__ import annotations

from mlsdk.testing import soak
from mncore_hdl.arch import MNCORE2


def test_short_soak_on_the_functional_model():
    stats = soak.soak(["mncore2:auto"], MNCORE2, range(1000, 1030), None, 24, 4096,
                      say=lambda s: None)
    assert stats.mismatches == []
    assert len(stats.seeds) == 30 and stats.calls > 300 and stats.reads > 300
    assert stats.relocations > 0 and stats.conversions > 0 and stats.reloads > 0
    assert stats.pinned > 0
