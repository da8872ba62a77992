"""Exceptions raised by the MN-Core compiler front end."""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "CompilerError",
    "IRVerificationError",
    "UnsupportedOperationError",
]


class CompilerError(Exception):
    """Base class of every error the MN-Core compiler raises on purpose."""


class UnsupportedOperationError(CompilerError):
    """A traced torch operation (or one of its arguments) has no MN-Core IR equivalent."""


class IRVerificationError(CompilerError, ValueError):
    """A graph breaks an IR invariant (undefined value, wrong type, unknown op, ...)."""


class CaptureError(CompilerError, TypeError):
    """The function or its sample inputs do not follow the dict-of-tensors calling convention."""
