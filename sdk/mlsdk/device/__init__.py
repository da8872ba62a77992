"""Device backends executing the command stream, and the device strings that select them.

The names load on first use (PEP 562), so a process that needs one module of a backend, such as
the cocotb co-simulation server importing the RTL bus driver, does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module (relative to this package) that defines it.
_EXPORTS = {
    "Device": ".base", "LoadedProgram": ".base", "FunctionalDevice": ".functional",
    "MNDevice": ".registry", "DEVICES": ".registry", "DEVICE_STRINGS": ".registry",
    **{name: ".commands" for name in (
        "Bind", "Buffer", "Command", "CommandResult", "Convert", "HostRead", "HostWrite",
        "Launch")},
}

__all__ = [
    "Device", "LoadedProgram", "FunctionalDevice", "MNDevice", "DEVICES", "DEVICE_STRINGS",
    "Bind", "Buffer", "Command", "CommandResult", "Convert", "HostRead", "HostWrite", "Launch",
]


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
    from .base import Device, LoadedProgram
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
