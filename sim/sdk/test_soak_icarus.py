"""A short bench/soak.py run on mncore2:icarus against mncore2:auto (a minute at most).

Identical records (commands, bytes per path, conversions, relocations), identical DRAM, and
every read equal to the interpreter's result, on both devices.
"""

from __future__ import annotations

from mlsdk.testing import soak
from mlsdk.testing.flows import require_device
from mncore_hdl.arch import MNCORE2_SIM


def test_short_soak_icarus_against_the_functional_model():
    require_device("mncore2:icarus")
    stats = soak.soak(["mncore2:icarus", "mncore2:auto"], MNCORE2_SIM, range(3), 0.75, 10,
                      256, say=lambda s: None)
    assert stats.mismatches == []
    assert len(stats.seeds) >= 1 and stats.calls > 0 and stats.reads > 0
