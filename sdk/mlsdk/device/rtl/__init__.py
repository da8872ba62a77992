"""RTL-backed devices: ``mncore2:rtl`` (Amaranth simulator) and ``mncore2:icarus`` (cocotb).

Each is one :class:`RtlDevice` subclass beside its simulator session: ``AmaranthDevice`` in
``amaranth_sim.py``, ``IcarusDevice`` in ``icarus.py``.
"""

from .device import RtlDevice
from .waves import WAVES_ENV

__all__ = ["RtlDevice", "WAVES_ENV"]
