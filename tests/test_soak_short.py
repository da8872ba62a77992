"""A few seconds of bench/soak.py on the functional model: random streams, zero mismatches."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mncore_hdl.arch import MNCORE2

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


def load_soak():
    spec = importlib.util.spec_from_file_location("soak", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("soak", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_short_soak_on_the_functional_model():
    soak = load_soak()
    stats = soak.soak(["mncore2:auto"], MNCORE2, range(1000, 1030), None, 24, 4096,
                      say=lambda s: None)
    assert stats.mismatches == []
    assert len(stats.seeds) == 30 and stats.calls > 300 and stats.reads > 300
    assert stats.relocations > 0 and stats.conversions > 0 and stats.reloads > 0
    assert stats.pinned > 0
