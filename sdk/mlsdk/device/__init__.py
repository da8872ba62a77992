"""Device backends executing the command stream, and the device strings that select them.

The names load on first use (PEP 562), so a process that needs one module of a backend, such as
the cocotb co-simulation server importing the RTL bus driver, does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: Public name -> the module (relative to this package) that defines it.
_EXPORTS = {
    "Device": ".base", "DramDevice": ".base", "LoadedProgram": ".base",
    "FunctionalDevice": ".functional",
    "MNDevice": ".registry", "DEVICES": ".registry", "DEVICE_STRINGS": ".registry",
    **{name: ".commands" for name in (
        "Bind", "Buffer", "Command", "CommandResult", "Convert", "HostRead", "HostWrite",
        "Launch")},
}

__all__ = [
    "Device", "DramDevice", "LoadedProgram", "FunctionalDevice", "MNDevice", "DEVICES",
    "DEVICE_STRINGS",
    "Bind", "Buffer", "Command", "CommandResult", "Convert", "HostRead", "HostWrite", "Launch",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__, globals())


if TYPE_CHECKING:
    from .base import Device, DramDevice, LoadedProgram
    from .commands import (
        Bind,
        Buffer,
        Command,
        CommandResult,
        Convert,
        HostRead,
        HostWrite,
        Launch,
    )
    from .functional import FunctionalDevice
    from .registry import DEVICE_STRINGS, DEVICES, MNDevice
