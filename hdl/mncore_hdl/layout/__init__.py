"""Tensor layouts in DRAM: MN-Core sub-axis notation, the golden mapping, and conversions.

Importable without Amaranth (the compiler and the functional model use it).
"""

from .conversion import ConversionDescriptor, Loop, UnsupportedConversion, conversion
from .dtypes import (
    DTYPES,
    ElementRangeError,
    ElementType,
    check_representable,
    element_type,
    from_bits,
    to_bits,
)
from .families import host_layout, native_layout
from .mapping import from_device, image_shape, slots, to_device
from .notation import Layout, LayoutError, SubAxis

__all__ = [
    "ConversionDescriptor", "Loop", "UnsupportedConversion", "conversion",
    "DTYPES", "ElementRangeError", "ElementType", "check_representable", "element_type",
    "from_bits", "to_bits",
    "host_layout", "native_layout",
    "from_device", "image_shape", "slots", "to_device",
    "Layout", "LayoutError", "SubAxis",
]
