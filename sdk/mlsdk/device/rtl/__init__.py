"""RTL-backed devices: ``mncore2:rtl`` (Amaranth simulator), ``mncore2:icarus`` and
``mncore2:verilator`` (cocotb).

Each is one :class:`RtlDevice` subclass beside its simulator session: ``AmaranthDevice`` in
``amaranth_sim.py``, ``IcarusDevice`` in ``icarus.py``, ``VerilatorDevice`` in ``verilator.py``.
The names load on first use (PEP 562): the cocotb server, which runs inside the simulator,
imports only the driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"RtlDevice": ".device", "WAVES_ENV": ".waves"}

__all__ = ["RtlDevice", "WAVES_ENV"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from .device import RtlDevice
    from .waves import WAVES_ENV
