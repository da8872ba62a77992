"""mlsdk: MLSDK-style programs on a modeled MN-Core 2.

>>> from mlsdk import Context, MNDevice, storage

The public names load on first use (PEP 562), so a process that only needs a piece of the
runtime, such as the Icarus co-simulation server importing the RTL bus driver, does not pay
for torch and the compiler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__ as __version__

#: Public name -> the module (relative to this package) that defines it.
_EXPORTS = {
    "Context": ".context", "COMPILE_OPTIONS": ".context",
    "CompiledFunction": ".compiled",
    "MNDevice": ".device.registry", "DEVICE_STRINGS": ".device.registry",
    "AutomapFunction": ".pytree", "PytreeStructureError": ".pytree",
    "register_pytree_namedtuple": ".pytree", "register_pytree_dataclass": ".pytree",
    "IOSpec": ".iospec", "TensorProxy": ".proxy", "Report": ".report", "CallRecord": ".report",
    "trace_scope": ".trace", "trace_event": ".trace",
    "Registry": ".registry",
    **{name: ".naming" for name in (
        "RegistrationError", "set_tensor_name", "get_tensor_name",
        "set_tensor_name_in_module")},
    **{name: ".optim" for name in (
        "MNCoreSGD", "MNCoreAdam", "MNCoreAdamW", "set_buffer_name_in_optimizer")},
    "CacheOptions": ".cache", "CacheError": ".cache", "CacheWarning": ".cache",
    # The compiler's own function (an absolute module): the set is the compiler's registry.
    "supported_ops": "mncore_compiler.supported",
    **{name: ".errors" for name in (
        "MLSDKError", "DeviceError", "DeviceMemoryError", "DeviceNotAvailableError",
        "CodegenError", "InputError", "IOSpecMismatchError", "ConversionRequiredError",
        "StaleTensorError", "FunctionUnloadedError")},
}

__all__ = [
    "Context", "MNDevice", "storage", "CompiledFunction", "IOSpec", "TensorProxy",
    "Report", "CallRecord", "COMPILE_OPTIONS", "DEVICE_STRINGS",
    "MLSDKError", "DeviceError", "DeviceMemoryError", "DeviceNotAvailableError",
    "CodegenError", "InputError", "IOSpecMismatchError", "ConversionRequiredError",
    "StaleTensorError", "FunctionUnloadedError",
    "AutomapFunction", "PytreeStructureError", "register_pytree_namedtuple",
    "register_pytree_dataclass",
    "trace_scope", "trace_event",
    "Registry", "RegistrationError", "set_tensor_name", "get_tensor_name",
    "set_tensor_name_in_module",
    "CacheOptions", "CacheError", "CacheWarning",
    "MNCoreSGD", "MNCoreAdam", "MNCoreAdamW", "set_buffer_name_in_optimizer",
    "supported_ops",
]


__getattr__, __dir__ = lazy_exports(__name__, {**_EXPORTS, "storage": ".storage"}, __all__,
                                   globals())


if TYPE_CHECKING:
    from mncore_compiler.supported import supported_ops

    from . import storage
    from .cache import CacheError, CacheOptions, CacheWarning
    from .compiled import CompiledFunction
    from .context import COMPILE_OPTIONS, Context
    from .device.registry import DEVICE_STRINGS, MNDevice
    from .errors import (
        CodegenError,
        ConversionRequiredError,
        DeviceError,
        DeviceMemoryError,
        DeviceNotAvailableError,
        FunctionUnloadedError,
        InputError,
        IOSpecMismatchError,
        MLSDKError,
        StaleTensorError,
    )
    from .iospec import IOSpec
    from .naming import (
        RegistrationError,
        get_tensor_name,
        set_tensor_name,
        set_tensor_name_in_module,
    )
    from .optim import MNCoreAdam, MNCoreAdamW, MNCoreSGD, set_buffer_name_in_optimizer
    from .proxy import TensorProxy
    from .pytree import (
        AutomapFunction,
        PytreeStructureError,
        register_pytree_dataclass,
        register_pytree_namedtuple,
    )
    from .registry import Registry
    from .report import CallRecord, Report
    from .trace import trace_event, trace_scope
