"""Checks of input values against what the device's element lanes hold (int64 as int32)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from mncore_hdl.layout import (
    ElementRangeError,
    Layout,
    check_representable,
    dtype_name,
    image_shape,
    to_device,
)
from mncore_hdl.layout.strided import strided_plan

from .errors import DeviceError, InputError

__all__ = ["check_input_values", "check_output_values", "input_bytes", "input_image"]

#: Tensor types whose bytes :func:`input_bytes` views (a subclass may hold its data elsewhere).
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def check_input_values(function: str, name: str, value: torch.Tensor) -> None:
    """Raise :class:`~mlsdk.InputError` when an element of input ``name`` cannot be laid out.

    Only int64 can fail: the device holds it in a 32-bit lane. Called before any command is
    issued, so a rejected call leaves the device, and the caller's tensor, as they were.
    """
    try:
        check_representable(value)
    except ElementRangeError as exc:
        raise _range_error(function, name, exc) from None


def input_image(function: str, name: str, value: torch.Tensor, layout: Layout) -> np.ndarray:
    """Input ``name``'s image in ``layout`` (:func:`~mncore_hdl.layout.to_device`, which
    checks the values as :func:`check_input_values` does, once): the same InputError for a
    value its lane cannot hold. Called before any command is issued."""
    try:
        return to_device(value, layout)
    except ElementRangeError as exc:
        raise _range_error(function, name, exc) from None


def input_bytes(value: torch.Tensor, layout: Layout) -> np.ndarray | None:
    """Input ``value``'s image in ``layout`` as a read-only view of the tensor's own bytes, when
    ``layout`` holds exactly those bytes (row-major, in one Group, of the tensor's own element
    type: an identity layout such as a host layout) and ``value`` is a contiguous CPU tensor;
    None otherwise (:func:`input_image` lays it out).

    The view is made from the tensor's read-only data pointer, so torch is never asked for
    write access to the tensor: a copy-on-write tensor (one the functional model keeps a lazy
    clone of, say) stays shared, where ``Tensor.numpy()`` would copy it first. Such a value
    needs no range check: only narrowed types (int64, bool) can hold what their lanes cannot,
    and their layouts are never the tensor's own bytes.
    """
    if (type(value) not in _PLAIN or not value.is_cpu or not value.is_contiguous()
            or value.dtype.itemsize * value.nelement() == 0
            or dtype_name(value.dtype) != layout.dtype or tuple(value.shape) != layout.shape
            or layout.element.narrowed or not strided_plan(layout).identity):
        return None
    return np.asarray(_ReadOnlyBytes(value, image_shape(layout)))


class _ReadOnlyBytes:
    """A CPU tensor's bytes through numpy's array interface, read-only, from its read-only
    data pointer (``Tensor.const_data_ptr``); the array numpy makes of it keeps it, and so the
    tensor, alive."""

    def __init__(self, tensor: Any, shape: tuple[int, int]):
        # Any: torch's type stubs lack const_data_ptr (every tensor has it since torch 2.1).
        self.tensor = tensor
        self.__array_interface__: dict[str, Any] = {
            "shape": shape, "typestr": "<u8", "version": 3,
            "data": (tensor.const_data_ptr(), True)}


def _range_error(function: str, name: str, exc: ElementRangeError) -> InputError:
    return InputError(f"Input {name!r} of {function}: {exc}; nothing was sent to the device")


def check_output_values(function: str, outputs: Mapping[str, torch.Tensor]) -> None:
    """Raise :class:`~mlsdk.DeviceError` when an output holds an int64 value its device lane
    cannot (an overflow of int32 inside the function); every backend checks the same way, the
    host reference included, so a program fails alike everywhere."""
    for name, value in outputs.items():
        try:
            check_representable(value)
        except ElementRangeError as exc:
            raise DeviceError(
                f"Output {name!r} of {function}: {exc}. The function computed a value the "
                "device's int64 outputs cannot hold"
            ) from None
