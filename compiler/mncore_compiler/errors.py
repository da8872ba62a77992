"""Exceptions raised by the MN-Core compiler, and the base class the SDK's errors share."""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "CodegenError",
    "CompilerError",
    "IRVerificationError",
    "MLSDKError",
    "UnsupportedOperationError",
]


class MLSDKError(Exception):
    """Base class of every SDK error (``mlsdk.MLSDKError``).

    It is declared here, below the SDK, so that an error the compiler raises on the SDK's
    behalf (:class:`CodegenError`) is one class that is both a :class:`CompilerError` and an
    SDK error; :mod:`mlsdk.errors` re-exports it and derives the rest of its errors from it.
    """


class CompilerError(Exception):
    """Base class of every error the MN-Core compiler raises on purpose."""


class UnsupportedOperationError(CompilerError):
    """A traced torch operation (or one of its arguments) has no MN-Core IR equivalent."""


class IRVerificationError(CompilerError, ValueError):
    """A graph breaks an IR invariant (undefined value, wrong type, unknown op, ...)."""


class CaptureError(CompilerError, TypeError):
    """The function or its sample inputs do not follow the dict-of-tensors calling convention."""


class CodegenError(CompilerError, MLSDKError):
    """A codegen directory that is missing, from another version, corrupt, or for another chip."""
