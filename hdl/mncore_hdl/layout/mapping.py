"""The golden mapping between a tensor and its DRAM image: element slots, to_device, from_device."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import from_bits, to_bits
from .notation import ADDRESS, GROUP, Layout, LayoutError

__all__ = ["axis_coordinates", "slots", "to_device", "from_device", "image_shape"]


def axis_coordinates(layout: Layout, axis: int) -> dict[str, np.ndarray]:
    """Per-level coordinate offsets of every index along one logical axis.

    Returns a dict level -> int64 array of length ``shape[axis]``; levels the axis does not
    touch are absent.
    """
    dim = layout.shape[axis]
    index = np.arange(dim, dtype=np.int64)
    coords: dict[str, np.ndarray] = {}
    inner = 1
    for sub in reversed(layout.axes[axis]):
        digit = (index // inner) % sub.extent
        coords[sub.level] = coords.get(sub.level, 0) + digit * sub.stride
        inner *= sub.extent
    return coords


def slots(layout: Layout) -> np.ndarray:
    """For every element, its slot in the flattened image ``(group, address, lane)``.

    The image is ``layout.groups x layout.lw_per_group`` LWs of ``lanes`` elements each, so an
    element at Group ``g``, LW address ``a`` and lane ``l`` sits at
    ``(g * lw_per_group + a) * lanes + l``.
    """
    lanes = layout.element.lanes
    lane_level = layout.element.lane_level
    weights = {GROUP: layout.lw_per_group * lanes, ADDRESS: lanes, lane_level: 1}
    rank = len(layout.shape)
    total = np.zeros((1,) * rank, dtype=np.int64)
    for axis in range(rank):
        shape = [1] * rank
        shape[axis] = layout.shape[axis]
        for level, coord in axis_coordinates(layout, axis).items():
            total = total + (coord * weights[level]).reshape(shape)
    return np.broadcast_to(total, layout.shape)


def image_shape(layout: Layout) -> tuple[int, int]:
    """Shape of the DRAM image: ``(groups, lw_per_group)`` LWs."""
    return layout.groups, layout.lw_per_group


def to_device(tensor: Any, layout: Layout) -> np.ndarray:
    """Lay ``tensor`` out in DRAM: a ``(groups, lw_per_group)`` array of uint64 LWs.

    Row ``g`` is what Group ``buffer.group + g`` holds from the buffer's address on. Padding
    lanes and unused LWs are zero.
    """
    _check_tensor(tensor, layout)
    etype = layout.element
    bits = to_bits(tensor)
    flat: np.ndarray = np.zeros(layout.lw_count * etype.lanes, dtype=etype.raw)
    flat[slots(layout).ravel()] = bits.ravel()
    return flat.view(np.uint64).reshape(image_shape(layout))


def from_device(words: np.ndarray, layout: Layout) -> Any:
    """Read a tensor back from its DRAM image (the inverse of :func:`to_device`)."""
    words = np.asarray(words)
    if words.dtype != np.uint64 or words.shape != image_shape(layout):
        raise LayoutError(
            f"Layout {layout}: expected an image of {image_shape(layout)} uint64 LWs, "
            f"got {words.shape} {words.dtype}"
        )
    etype = layout.element
    flat: np.ndarray = np.ascontiguousarray(words).reshape(-1).view(etype.raw)
    bits = flat[slots(layout).ravel()].reshape(layout.shape)
    return from_bits(bits, layout.dtype)


def _check_tensor(tensor: Any, layout: Layout) -> None:
    shape = tuple(getattr(tensor, "shape", ()))
    dtype = str(getattr(tensor, "dtype", "?")).removeprefix("torch.")
    if shape != layout.shape or dtype != layout.dtype:
        raise LayoutError(
            f"Layout {layout} holds a {layout.dtype} tensor of shape {layout.shape}, "
            f"not a {dtype} tensor of shape {shape}"
        )
