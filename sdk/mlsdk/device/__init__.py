"""Device backends executing the command stream, and the device strings that select them."""

from .base import Device, LoadedProgram
from .commands import Bind, Buffer, Command, CommandResult, Convert, HostRead, HostWrite, Launch
from .functional import FunctionalDevice
from .registry import DEVICE_STRINGS, DEVICES, MNDevice

__all__ = [
    "Device", "LoadedProgram", "FunctionalDevice", "MNDevice", "DEVICES", "DEVICE_STRINGS",
    "Bind", "Buffer", "Command", "CommandResult", "Convert", "HostRead", "HostWrite", "Launch",
]
