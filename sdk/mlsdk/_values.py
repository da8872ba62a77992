"""Checks of input values against what the device's element lanes hold (int64 as int32)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from mncore_hdl.layout import ElementRangeError, Layout, check_representable, to_device

from .errors import DeviceError, InputError

__all__ = ["check_input_values", "check_output_values", "input_image"]


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
