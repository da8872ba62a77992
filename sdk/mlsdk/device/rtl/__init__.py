"""RTL-backed devices: ``mncore2:rtl`` (Amaranth simulator) and ``mncore2:icarus`` (cocotb)."""

from .device import RtlDevice
from .waves import WAVES_ENV

__all__ = ["RtlDevice", "WAVES_ENV"]
