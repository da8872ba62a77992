"""Tensor layouts in DRAM: sub-axis notation and definition, golden and fast mappings, conversions.

Importable without Amaranth (the compiler and the functional model use it).
"""

from .conversion import ConversionDescriptor, Loop, UnsupportedConversion, conversion
from .dtypes import (
    DTYPES,
    ElementRangeError,
    ElementType,
    check_representable,
    dtype_name,
    element_type,
    from_bits,
    to_bits,
)
from .families import host_layout, native_layout
from .mapping import from_device, to_device
from .notation import Layout, LayoutError, SubAxis, image_shape, slots
from .reference import from_device_reference, to_device_reference

__all__ = [
    "dtype_name",
    "ConversionDescriptor", "Loop", "UnsupportedConversion", "conversion",
    "DTYPES", "ElementRangeError", "ElementType", "check_representable", "element_type",
    "from_bits", "to_bits",
    "host_layout", "native_layout",
    "from_device", "image_shape", "slots", "to_device",
    "Layout", "LayoutError", "SubAxis",
    "from_device_reference", "to_device_reference",
]
