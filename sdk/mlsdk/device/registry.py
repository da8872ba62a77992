"""Device strings: the one table of backends, and MNDevice, the user's handle on one of them.

Adding a backend is one row of :data:`DEVICES` plus the file holding its
:class:`~mlsdk.device.base.Device` subclass (imported only when a Context opens it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from urllib.parse import parse_qsl

from mncore_hdl.arch import MNCORE2, MNCORE2_SIM, ArchConfig

from .base import Device

__all__ = ["MNDevice", "DeviceEntry", "DEVICES", "DEVICE_STRINGS", "DEVICE_OPTIONS"]


@dataclass(frozen=True)
class DeviceEntry:
    """One row of the device table.

    Attributes
    ----------
    backend : str
        The backend's short name (``MNDevice.backend``).
    device_class : str
        ``"module:Class"``, the module relative to :mod:`mlsdk.device`.
    description : str
        What the device is, for listings and error messages.
    config : ArchConfig
        The chip modeled when the user passes none.
    takes_options : bool
        Whether the string may carry :data:`DEVICE_OPTIONS` after ``?``.
    """

    backend: str
    device_class: str
    description: str
    config: ArchConfig = MNCORE2
    takes_options: bool = False

    def load(self) -> type[Device]:
        """Import the device class."""
        module, _, name = self.device_class.partition(":")
        cls = getattr(importlib.import_module(module, __package__), name)
        if not (isinstance(cls, type) and issubclass(cls, Device)):
            raise TypeError(f"Device table entry {self.device_class!r} must name a Device "
                            f"subclass, not {cls!r}")
        return cls


_FUNCTIONAL = ".functional:FunctionalDevice"

#: Device string -> its backend. The RTL devices default to ``MNCORE2_SIM``, whose DRAM is the
#: simulated window, so the allocator never leaves it.
DEVICES: dict[str, DeviceEntry] = {
    "mncore2:auto": DeviceEntry("functional", _FUNCTIONAL,
                                "functional model: numpy DRAM, modeled cycles"),
    "mncore2:0": DeviceEntry("functional", _FUNCTIONAL, "functional model (the first device)"),
    "emu2": DeviceEntry("functional", _FUNCTIONAL, "functional model (emulator name)"),
    "pfvm:cpu": DeviceEntry("reference", ".reference:ReferenceDevice",
                            "torch eager on the host, no device model"),
    "pfvm:cuda": DeviceEntry("reference", ".reference:ReferenceDevice",
                             "torch eager on the host's CUDA GPU, no device model"),
    "mncore2:rtl": DeviceEntry("rtl", ".rtl.amaranth_sim:AmaranthDevice",
                               "Amaranth RTL in Amaranth's simulator, measured cycles",
                               MNCORE2_SIM, takes_options=True),
    "mncore2:icarus": DeviceEntry("icarus", ".rtl.icarus:IcarusDevice",
                                  "RTL as Verilog under cocotb on Icarus, measured cycles",
                                  MNCORE2_SIM, takes_options=True),
    "mncore2:verilator": DeviceEntry("verilator", ".rtl.verilator:VerilatorDevice",
                                     "RTL as Verilog under cocotb on Verilator (cached C++ "
                                     "build), measured cycles", MNCORE2_SIM, takes_options=True),
}

#: Device string -> (backend, what it is): the table above, for listing.
DEVICE_STRINGS: dict[str, tuple[str, str]] = {
    name: (entry.backend, entry.description) for name, entry in DEVICES.items()
}

#: Options a device string may carry after ``?`` (on rows that take options), e.g.
#: ``mncore2:rtl?waves=out/waves``.
DEVICE_OPTIONS: dict[str, str] = {
    "waves": "folder: write a wave file (FST by default) and a GTKWave save file (.gtkw) of "
             "the session there",
    "format": "fst or vcd: the wave file's format (default: fst; mncore2:rtl writes vcd)",
    "calls": "calls like 2, 2-3 or 1,4-5: record only those calls' waves (counting from 1)",
}


def _split_options(name: str, entry: DeviceEntry) -> dict[str, str]:
    base, _, query = name.partition("?")
    if not query:
        return {}
    if not entry.takes_options:
        takers = " and ".join(n for n, e in DEVICES.items() if e.takes_options)
        raise ValueError(f"Device {base!r} takes no options, but {name!r} gives {query!r}; "
                         f"options (e.g. ?waves=DIR) apply to {takers}")
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in options:
            raise ValueError(f"Option {key!r} is given twice in device string {name!r}; give "
                             "it once")
        options[key] = value
    unknown = sorted(set(options) - set(DEVICE_OPTIONS))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in DEVICE_OPTIONS.items())
        raise ValueError(f"Unknown option(s) {unknown} in device string {name!r}; "
                         f"known options are {known}")
    if "waves" in options:
        from .rtl.waves import check_waves_folder

        check_waves_folder(options["waves"], f"The ?waves option of device {base!r}")
    if "calls" in options:
        from .rtl.waves import parse_calls

        parse_calls(options["calls"], f"The ?calls option of device {base!r}")
    if "format" in options and options["format"] not in ("fst", "vcd"):
        raise ValueError(f"The ?format option of device {base!r} must be fst or vcd, not "
                         f"{options['format']!r}")
    return options


class MNDevice:
    """A device selected by its string, e.g. ``MNDevice("mncore2:auto")``.

    Parameters
    ----------
    name : str
        One of :data:`DEVICES`; those that take options may add them after ``?``
        (:data:`DEVICE_OPTIONS`), e.g. ``"mncore2:rtl?waves=build/waves"``.
    config : ArchConfig, optional
        The chip to model (default: the table row's, MN-Core 2; for the RTL devices
        ``MNCORE2_SIM``, whose DRAM is the simulated window).
    """

    def __init__(self, name: str, config: ArchConfig | None = None):
        if not isinstance(name, str):
            raise TypeError(f"Device name must be a string, not {name!r}")
        base = name.partition("?")[0]
        if base not in DEVICES:
            valid = ", ".join(DEVICES)
            raise ValueError(f"Unknown device {name!r}; valid device strings are: {valid}")
        if config is not None and not isinstance(config, ArchConfig):
            raise TypeError(f"config must be an ArchConfig, not {config!r}")
        self.name = name
        self.base_name = base
        self.entry = DEVICES[base]
        self.backend = self.entry.backend
        self.options = _split_options(name, self.entry)
        self.config = config or self.entry.config

    def __repr__(self) -> str:
        return f"MNDevice({self.name!r})"

    def open(self) -> Device:
        """Create the backend (a DeviceNotAvailableError when this machine cannot run it)."""
        return self.entry.load().create(self.config, self.name, self.options)
