"""Test tiers: every test is marked by the folder it lives in (README, "Tests").

==========  ============  ==============================================================
marker      folder        what runs there
==========  ============  ==============================================================
``fast``    ``tests/``    unit, property and SDK tests on the functional model; no HDL
                          simulator (a few Amaranth simulations of single blocks)
``hdl``     ``sim/hdl``   cocotb benches of the memory controller and layout converter
``formal``  ``sim/formal``  SymbiYosys proofs and their mutants
``rtl``     ``sim/sdk``   SDK programs end to end on the RTL devices (Icarus, Verilator)
==========  ============  ==============================================================

``pytest -m fast`` (or ``pytest tests/``) selects a tier; ``scripts/test`` runs them in order,
stopping at the first that fails, as CI does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent
TIERS = {
    ("tests",): "fast",
    ("sim", "hdl"): "hdl",
    ("sim", "formal"): "formal",
    ("sim", "sdk"): "rtl",
}


def tier_of(path: Path) -> str | None:
    """The tier a test file belongs to, by its folder; None outside the tiers."""
    try:
        parts = Path(path).resolve().relative_to(_ROOT).parts
    except ValueError:
        return None
    for prefix, tier in TIERS.items():
        if parts[: len(prefix)] == prefix:
            return tier
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            raise pytest.UsageError(
                f"{item.nodeid}: a test outside the tier folders "
                f"({', '.join('/'.join(p) for p in TIERS)}); move it into one"
            )
        item.add_marker(getattr(pytest.mark, tier))
