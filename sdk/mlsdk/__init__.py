"""mlsdk: MLSDK-style programs on a modeled MN-Core 2.

>>> from mlsdk import Context, MNDevice, storage
"""

from . import storage
from .compiled import CompiledFunction
from .context import COMPILE_OPTIONS, Context
from .device.registry import DEVICE_STRINGS, MNDevice
from .errors import (
    CodegenError,
    ConversionRequiredError,
    DeviceError,
    DeviceMemoryError,
    DeviceNotAvailableError,
    InputError,
    IOSpecMismatchError,
    MLSDKError,
    StaleTensorError,
)
from .iospec import IOSpec
from .proxy import TensorProxy
from .report import CallRecord, Report

__all__ = [
    "Context", "MNDevice", "storage", "CompiledFunction", "IOSpec", "TensorProxy",
    "Report", "CallRecord", "COMPILE_OPTIONS", "DEVICE_STRINGS",
    "MLSDKError", "DeviceError", "DeviceMemoryError", "DeviceNotAvailableError",
    "CodegenError", "InputError", "IOSpecMismatchError", "ConversionRequiredError",
    "StaleTensorError",
]
__version__ = "0.1.0"
