"""Errors the SDK raises; each names what was expected and what was given."""

from __future__ import annotations

# The base class and CodegenError are the compiler's own classes (one class each), so that what
# DeviceProgram.load raises is an mlsdk.CodegenError and an mlsdk.MLSDKError as it stands.
from mncore_compiler.errors import CodegenError, MLSDKError

__all__ = [
    "MLSDKError", "DeviceError", "DeviceMemoryError", "DeviceNotAvailableError",
    "CodegenError", "IOSpecMismatchError", "ConversionRequiredError", "StaleTensorError",
    "InputError", "FunctionUnloadedError", "OptimizerChangedError",
]


class DeviceError(MLSDKError):
    """A device failed to execute a command."""


class DeviceMemoryError(DeviceError, MemoryError):
    """Device DRAM has no room for a buffer."""


class DeviceNotAvailableError(DeviceError):
    """A known device string whose backend cannot run here."""


class InputError(MLSDKError, ValueError):
    """Inputs of a call that do not match the compiled function."""


class IOSpecMismatchError(InputError):
    """A TensorProxy whose IOSpec cannot feed the input (different shape or dtype)."""


class ConversionRequiredError(InputError):
    """Strict mode: the call would need a DRAM-to-DRAM layout conversion."""


class StaleTensorError(MLSDKError):
    """A TensorProxy whose buffer was freed, or that belongs to another Context."""


class FunctionUnloadedError(DeviceError):
    """A call of a CompiledFunction after its :meth:`~mlsdk.CompiledFunction.unload`."""


class OptimizerChangedError(MLSDKError, RuntimeError):
    """A compiled training step called after its optimizer's parameter list changed."""
