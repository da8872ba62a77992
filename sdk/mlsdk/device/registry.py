"""Device strings: which backend each one selects, and MNDevice, the user's handle on it."""

from __future__ import annotations

import shutil
from urllib.parse import parse_qsl

from mncore_hdl.arch import MNCORE2, MNCORE2_SIM, ArchConfig

from ..errors import DeviceNotAvailableError
from .base import Device

__all__ = ["MNDevice", "DEVICE_STRINGS", "DEVICE_OPTIONS"]

#: Device string -> (backend, what it is).
DEVICE_STRINGS: dict[str, tuple[str, str]] = {
    "mncore2:auto": ("functional", "functional model: numpy DRAM, modeled cycles"),
    "mncore2:0": ("functional", "functional model (the first device)"),
    "emu2": ("functional", "functional model (emulator name)"),
    "pfvm:cpu": ("reference", "torch eager on the host, no device model"),
    "mncore2:rtl": ("rtl", "Amaranth RTL in Amaranth's simulator, measured cycles"),
    "mncore2:icarus": ("icarus", "RTL as Verilog under cocotb on Icarus, measured cycles"),
}

#: Options an RTL device string may carry after ``?``, e.g. ``mncore2:rtl?waves=out/waves``.
DEVICE_OPTIONS: dict[str, str] = {
    "waves": "folder: write a VCD and a GTKWave save file (.gtkw) of the session there",
}


def _split_options(name: str, backend: str) -> dict[str, str]:
    base, _, query = name.partition("?")
    if not query:
        return {}
    if backend not in ("rtl", "icarus"):
        raise ValueError(f"Device {base!r} takes no options, but {name!r} gives {query!r}; "
                         "options (e.g. ?waves=DIR) apply to mncore2:rtl and mncore2:icarus")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(DEVICE_OPTIONS))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in DEVICE_OPTIONS.items())
        raise ValueError(f"Unknown option(s) {unknown} in device string {name!r}; "
                         f"known options are {known}")
    return options


class MNDevice:
    """A device selected by its string, e.g. ``MNDevice("mncore2:auto")``.

    Parameters
    ----------
    name : str
        One of :data:`DEVICE_STRINGS`; the RTL ones may add options after ``?``
        (:data:`DEVICE_OPTIONS`), e.g. ``"mncore2:rtl?waves=build/waves"``.
    config : ArchConfig, optional
        The chip to model (default: MN-Core 2; for the RTL devices ``MNCORE2_SIM``, whose
        DRAM is the simulated window, so the allocator never leaves it).
    """

    def __init__(self, name: str, config: ArchConfig | None = None):
        if not isinstance(name, str):
            raise TypeError(f"Device name must be a string, not {name!r}")
        base = name.partition("?")[0]
        if base not in DEVICE_STRINGS:
            valid = ", ".join(DEVICE_STRINGS)
            raise ValueError(f"Unknown device {name!r}; valid device strings are: {valid}")
        if config is not None and not isinstance(config, ArchConfig):
            raise TypeError(f"config must be an ArchConfig, not {config!r}")
        self.name = name
        self.base_name = base
        self.backend = DEVICE_STRINGS[base][0]
        self.options = _split_options(name, self.backend)
        default = MNCORE2_SIM if self.backend in ("rtl", "icarus") else MNCORE2
        self.config = config or default

    def __repr__(self) -> str:
        return f"MNDevice({self.name!r})"

    @property
    def is_reference(self) -> bool:
        """True for ``pfvm:cpu``: functions run eagerly on the host, no device model."""
        return self.backend == "reference"

    def open(self) -> Device | None:
        """Create the backend (None for the host reference, which needs no device)."""
        base = self.base_name
        if self.backend == "functional":
            from .functional import FunctionalDevice

            return FunctionalDevice(self.config, self.name)
        if self.backend == "reference":
            return None
        if self.backend in ("rtl", "icarus"):
            from .rtl import RtlDevice
            from .rtl.waves import waves_folder

            if self.backend == "icarus" and shutil.which("vvp") is None:
                raise DeviceNotAvailableError(
                    f"Device {self.name!r} needs Icarus Verilog (vvp), which is not on PATH; "
                    "install it (apt-get install iverilog) or use mncore2:rtl")
            return RtlDevice(self.config, self.name, self.backend,
                             waves_folder(self.options.get("waves")))
        raise DeviceNotAvailableError(
            f"Device {self.name!r} ({DEVICE_STRINGS[base][1]}) is not available in this kit"
        )
