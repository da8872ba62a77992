"""RTL-backed devices: ``mncore2:rtl`` (Amaranth simulator), ``mncore2:icarus`` and
``mncore2:verilator`` (cocotb).

Each is one :class:`RtlDevice` subclass beside its simulator session: ``AmaranthDevice`` in
``amaranth_sim.py``, ``IcarusDevice`` in ``icarus.py``, ``VerilatorDevice`` in ``verilator.py``.
The names load on first use (PEP 562): the cocotb server, which runs inside the simulator,
imports only the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

_EXPORTS = {"RtlDevice": ".device", "WAVES_ENV": ".waves"}

__all__ = ["RtlDevice", "WAVES_ENV"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__, globals())


if TYPE_CHECKING:
    from .device import RtlDevice
    from .waves import WAVES_ENV
