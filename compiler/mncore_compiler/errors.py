"""Exceptions raised by the MN-Core compiler, and the base class the SDK's errors share."""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "CodegenError",
    "CompilerError",
    "IRVerificationError",
    "MLSDKError",
    "TraceError",
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
    """Traced torch operations (or their arguments) with no MN-Core IR equivalent.

    Parameters
    ----------
    message : str
        The whole message: every problem of the function, one compile listing them all.
    problems : sequence of (str, str or None)
        One ``(problem, where)`` pair per distinct problem, in trace order: ``problem`` starts
        with the aten overload (``"aten.sort.default is not supported ..."``), ``where`` is the
        user's source line that produced it (``"model.py:12 in forward: y = x.sort()"``), or
        None when the trace does not tell.
    """

    def __init__(self, message: str, problems: tuple[tuple[str, str | None], ...] = ()):
        super().__init__(message)
        self.problems = problems


class TraceError(CompilerError, RuntimeError):
    """torch raised an error while the function was traced on its sample inputs; the message
    names the user's source line and what to do, and ``__cause__`` is torch's error."""


class IRVerificationError(CompilerError, ValueError):
    """A graph breaks an IR invariant (undefined value, wrong type, unknown op, ...)."""


class CaptureError(CompilerError, TypeError):
    """The function or its sample inputs do not follow the dict-of-tensors calling convention."""


class CodegenError(CompilerError, MLSDKError):
    """A codegen directory that is missing, from another version, corrupt, or for another chip."""
