"""The golden layout model: every element placed through its slot index (pure and simple)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import dtype_name, from_bits, to_bits
from .notation import Layout, LayoutError, image_shape, slots

__all__ = ["to_device_reference", "from_device_reference", "check_tensor", "check_image"]


def to_device_reference(tensor: Any, layout: Layout) -> np.ndarray:
    """:func:`to_device` through the index of every element's slot (the golden model)."""
    check_tensor(tensor, layout)
    etype = layout.element
    bits = to_bits(tensor)
    flat: np.ndarray = np.zeros(layout.lw_count * etype.lanes, dtype=etype.raw)
    flat[slots(layout).ravel()] = bits.ravel()
    return flat.view(np.uint64).reshape(image_shape(layout))


def from_device_reference(words: np.ndarray, layout: Layout) -> Any:
    """:func:`from_device` through the index of every element's slot (the golden model)."""
    words = check_image(words, layout)
    flat: np.ndarray = np.ascontiguousarray(words).reshape(-1).view(layout.element.raw)
    bits = flat[slots(layout).ravel()].reshape(layout.shape)
    return from_bits(bits, layout.dtype)



def check_image(words: Any, layout: Layout) -> np.ndarray:
    """``words`` as an array, if it is a ``(groups, lw_per_group)`` uint64 image of ``layout``;
    LayoutError naming both shapes if not."""
    words = np.asarray(words)
    if words.dtype != np.uint64 or words.shape != image_shape(layout):
        raise LayoutError(
            f"Layout {layout}: expected an image of {image_shape(layout)} uint64 LWs, "
            f"got {words.shape} {words.dtype}"
        )
    return words


def check_tensor(tensor: Any, layout: Layout, *, raise_error: bool = True) -> bool:
    """Whether ``tensor`` has the shape and dtype ``layout`` holds; raises LayoutError
    instead of returning False unless ``raise_error`` is False."""
    shape = tuple(getattr(tensor, "shape", ()))
    dtype = dtype_name(getattr(tensor, "dtype", "?"))
    if shape == layout.shape and dtype == layout.dtype:
        return True
    if raise_error:
        raise LayoutError(
            f"Layout {layout} holds a {layout.dtype} tensor of shape {layout.shape}, "
            f"not a {dtype} tensor of shape {shape}"
        )
    return False

