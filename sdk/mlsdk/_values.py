"""Checks of input values against what the device's element lanes hold (int64 as int32)."""

from __future__ import annotations

import torch
from mncore_hdl.layout import ElementRangeError, check_representable

from .errors import InputError

__all__ = ["check_input_values"]


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
