"""Checks of input values against what the device's element lanes hold (int64 as int32)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from mncore_hdl.layout import ElementRangeError, check_representable

from .errors import DeviceError, InputError

__all__ = ["check_input_values", "check_output_values"]


def check_input_values(function: str, name: str, value: torch.Tensor) -> None:
    """Raise :class:`~mlsdk.InputError` when an element of input ``name`` cannot be laid out.

    Only int64 can fail: the device holds it in a 32-bit lane. Called before any command is
    issued, so a rejected call leaves the device, and the caller's tensor, as they were.
    """
    try:
        check_representable(value)
    except ElementRangeError as exc:
        raise InputError(
            f"Input {name!r} of {function}: {exc}; nothing was sent to the device"
        ) from None


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
