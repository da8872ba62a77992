"""Device strings: which backend each one selects, and MNDevice, the user's handle on it."""

from __future__ import annotations

from mncore_hdl.arch import MNCORE2, ArchConfig

from ..errors import DeviceNotAvailableError
from .base import Device

__all__ = ["MNDevice", "DEVICE_STRINGS"]

#: Device string -> (backend, what it is).
DEVICE_STRINGS: dict[str, tuple[str, str]] = {
    "mncore2:auto": ("functional", "functional model: numpy DRAM, modeled cycles"),
    "mncore2:0": ("functional", "functional model (the first device)"),
    "emu2": ("functional", "functional model (emulator name)"),
    "pfvm:cpu": ("reference", "torch eager on the host, no device model"),
    "mncore2:rtl": ("rtl", "Amaranth RTL in Amaranth's simulator, measured cycles"),
    "mncore2:icarus": ("icarus", "RTL as Verilog under cocotb on Icarus, measured cycles"),
}


class MNDevice:
    """A device selected by its string, e.g. ``MNDevice("mncore2:auto")``.

    Parameters
    ----------
    name : str
        One of :data:`DEVICE_STRINGS`.
    config : ArchConfig, optional
        The chip to model (default: MN-Core 2).
    """

    def __init__(self, name: str, config: ArchConfig | None = None):
        if not isinstance(name, str):
            raise TypeError(f"Device name must be a string, not {name!r}")
        if name not in DEVICE_STRINGS:
            valid = ", ".join(DEVICE_STRINGS)
            raise ValueError(f"Unknown device {name!r}; valid device strings are: {valid}")
        if config is not None and not isinstance(config, ArchConfig):
            raise TypeError(f"config must be an ArchConfig, not {config!r}")
        self.name = name
        self.backend = DEVICE_STRINGS[name][0]
        self.config = config or MNCORE2

    def __repr__(self) -> str:
        return f"MNDevice({self.name!r})"

    @property
    def is_reference(self) -> bool:
        """True for ``pfvm:cpu``: functions run eagerly on the host, no device model."""
        return self.backend == "reference"

    def open(self) -> Device | None:
        """Create the backend (None for the host reference, which needs no device)."""
        if self.backend == "functional":
            from .functional import FunctionalDevice

            return FunctionalDevice(self.config, self.name)
        if self.backend == "reference":
            return None
        raise DeviceNotAvailableError(
            f"Device {self.name!r} ({DEVICE_STRINGS[self.name][1]}) is not available yet in "
            "this kit; use mncore2:auto for the functional model"
        )
