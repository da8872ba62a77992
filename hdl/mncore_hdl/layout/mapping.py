"""The mapping between a tensor and its DRAM image: to_device, write_image, from_device.

Two paths compute the same images. The golden model (:mod:`.reference`) places every element
through its slot (:func:`~.notation.slots`, the layout's definition); the strided path used here
(:mod:`.strided`) sees both the tensor and the image as numpy views whose dimensions are the
layout's sub-axes, and copies once between them. Tests hold the two paths to identical images.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import check_representable, element_type, from_bits, stored_tensor
from .notation import Layout, image_shape
from .reference import check_image, check_tensor, from_device_reference, to_device_reference
from .strided import copy_between, copy_strided, image_view, is_dense, rows_ok, strided_plan

# The SDK's functional model reads a layout's whole tensor <-> image service here: the fast
# path, its checks and its golden counterpart (each defined once, in its own module).
__all__ = ["to_device", "from_device", "write_image", "check_tensor", "is_dense",
           "to_device_reference", "from_device_reference"]


def _raw_image(words: np.ndarray, layout: Layout) -> np.ndarray:
    """An image's LWs seen as ``(groups, lw_per_group * lanes)`` elements, without a copy."""
    if words.strides[1] != words.itemsize:
        words = np.ascontiguousarray(words)
    return words.view(layout.element.raw)


def _raw_view(tensor: Any) -> np.ndarray:
    """The tensor's bits as a numpy view of its own memory (no copy, any strides), or of its
    stored form for a narrowed type."""
    import torch

    etype = element_type(tensor.dtype)
    signed = torch.int32 if etype.bits == 32 else torch.int16
    # A narrowed type (int64, bool) is converted to its stored form first: a new tensor.
    return stored_tensor(tensor, etype).view(signed).numpy().view(etype.raw)


class _Identity:
    """What an identity layout (the tensor's own bytes in row-major order, in one Group: a
    host layout, say) takes to encode and decode, worked out once per layout: the tensor's
    shape and torch dtype, the torch and numpy integer types of its lanes, the image's shape."""

    __slots__ = ("aminmax", "bounds", "dtype", "image", "lanes", "narrowed", "numpy_lanes",
                 "numpy_stored", "numpy_wide", "shape", "stored", "via_lanes")

    def __init__(self, layout: Layout) -> None:
        import torch

        etype = layout.element
        self.shape = tuple(layout.shape)
        self.dtype = getattr(torch, etype.name)
        self.stored = getattr(torch, etype.stored_as or etype.name)
        self.narrowed = etype.narrowed
        self.lanes = torch.int32 if etype.bits == 32 else torch.int16
        self.numpy_lanes = np.int32 if etype.bits == 32 else np.int16
        self.image = image_shape(layout)
        #: The values a narrowed integer lane holds (None: every value round-trips).
        self.bounds = etype.value_range if etype.narrowed else None
        self.aminmax = torch.aminmax
        # numpy holds every type but bfloat16 as it is: a tensor's bytes reach numpy in one
        # step, and a narrowing or widening costs less there than as a torch op.
        self.via_lanes = etype.name == "bfloat16"
        self.numpy_stored = np.dtype(etype.stored_as) if etype.narrowed else None
        self.numpy_wide = np.dtype(etype.name) if etype.narrowed else None


def _identity(layout: Layout) -> _Identity | None:
    return _Identity(layout) if strided_plan(layout).identity else None


def _encode_identity(tensor: Any, ident: _Identity) -> np.ndarray | None:
    """:func:`to_device` of a contiguous CPU tensor of the layout's exact type into an identity
    layout, with nothing in between (None: not such a tensor, take the general path)."""
    if (tensor.dtype != ident.dtype or tensor.shape != ident.shape or not tensor.is_cpu
            or not tensor.is_contiguous()):
        return None
    t = tensor.detach() if tensor.requires_grad else tensor
    values: np.ndarray = (t.view(ident.lanes) if ident.via_lanes else t).numpy()
    if ident.narrowed:
        if ident.bounds is not None and values.size:
            least, most = ident.aminmax(t)  # one pass (numpy's min and max cost more)
            if int(least) < ident.bounds[0] or int(most) > ident.bounds[1]:
                check_representable(t)  # raises, naming the first value outside
        values = values.astype(ident.numpy_stored)  # as torch's .to() converts
    view = values.reshape(-1).view(np.uint64).reshape(ident.image)
    view.flags.writeable = False
    return view


def to_device(tensor: Any, layout: Layout) -> np.ndarray:
    """Lay ``tensor`` out in DRAM: a ``(groups, lw_per_group)`` array of uint64 LWs.

    Row ``g`` is what Group ``buffer.group + g`` holds from the buffer's address on. Padding
    lanes and unused LWs are zero.
    """
    ident = layout.memo("identity_codec", _identity)
    if ident is not None and hasattr(tensor, "is_cpu"):
        image = _encode_identity(tensor, ident)
        if image is not None:
            return image
    check_tensor(tensor, layout)
    shape = image_shape(layout)
    plan = strided_plan(layout)
    if plan.identity and tensor.is_contiguous() and tensor.device.type == "cpu":
        # The image is the tensor's own bytes: a read-only view, no copy.
        view = _raw_view(tensor).reshape(-1).view(np.uint64).reshape(shape)
        view.flags.writeable = False
        return view
    words = np.empty(shape, np.uint64) if plan.dense else np.zeros(shape, np.uint64)
    write_image(words, tensor, layout)
    return words


def write_image(words: np.ndarray, tensor: Any, layout: Layout) -> None:
    """Store ``tensor``'s elements into ``words``, a ``(groups, lw_per_group)`` uint64 array
    (a view of DRAM allowed): one strided copy per chunk; slots no element maps to are left
    as they are."""
    bits = _raw_view(tensor)
    raw: np.ndarray = words.view(layout.element.raw)
    plan = strided_plan(layout)
    if bits.flags.c_contiguous and rows_ok(raw):
        row, item = raw.strides[0], raw.itemsize
        for chunk in plan.chunks:
            copy_between(raw, chunk.image_geometry(row, item),
                          bits, chunk.tensor_geometry(bits.strides), chunk.split, item)
        return
    for chunk in plan.chunks:
        copy_strided(image_view(raw, chunk), bits[chunk.index].reshape(chunk.split))


def from_device(words: np.ndarray, layout: Layout, *, copy: bool = True) -> Any:
    """Read a tensor back from its DRAM image (the inverse of :func:`to_device`).

    ``words`` may be any ``(groups, lw_per_group)`` uint64 array, a view of DRAM included; the
    tensor returned owns its memory, unless ``copy`` is False and the image is the tensor's
    own bytes (a row-major packed layout in one Group, ``words`` writable): then it is a view
    of ``words``.
    """
    ident = layout.memo("identity_codec", _identity)
    if (ident is not None and isinstance(words, np.ndarray) and words.dtype == np.uint64
            and words.shape == ident.image and words.flags.writeable
            and words.flags.c_contiguous):
        # The image is the tensor's bytes: a view of it as the lanes' type, widened into a new
        # tensor for a narrowed type, or copied when asked.
        import torch

        lanes = words.view(ident.numpy_lanes).reshape(ident.shape)
        if ident.narrowed:  # widened in numpy: a new array, as torch's .to() makes it
            return torch.from_numpy(lanes.astype(ident.numpy_wide))
        stored = torch.from_numpy(lanes).view(ident.stored)
        return stored.clone() if copy else stored
    words = check_image(words, layout)
    if (not copy and strided_plan(layout).identity and words.flags.writeable
            and words.flags.c_contiguous):
        return from_bits(words.view(layout.element.raw).reshape(layout.shape), layout.dtype)
    raw: np.ndarray = _raw_image(words, layout)
    if not rows_ok(raw):
        raw = np.ascontiguousarray(raw)
    out: np.ndarray = np.empty(layout.shape, dtype=layout.element.raw)
    row, item = raw.strides[0], raw.itemsize
    for chunk in strided_plan(layout).chunks:
        copy_between(out, chunk.tensor_geometry(out.strides),
                      raw, chunk.image_geometry(row, item), chunk.split, item)
    return from_bits(out, layout.dtype)


