"""Perfetto traces of what the host and the device did: :class:`trace_scope`, :class:`trace_event`.

>>> with trace_scope("add.pftrace"):
...     with trace_event("step"):
...         out = add({"x": x, "y": y})["z"].cpu()

Open the file in https://ui.perfetto.dev (see ``docs/trace.md`` for the tracks).

What is recorded, and where
---------------------------
Host tracks (one per Python thread, under the process, wall clock): ``compile`` and ``load``
slices, one slice per compiled call, one per ``TensorProxy.cpu()``, one per device command the
host issued (nested in the call that issued it), and the user's :class:`trace_event` slices.

Device tracks (one group per device, on the device's cycle clock, see :mod:`mlsdk.trace_writer`):
``host port`` (HostWrite, HostRead), ``compute`` (Launch), ``layout converter`` (Convert) and
``descriptors`` (Bind, the relocation's register write). Each command slice carries its bytes
per path and its cycles with their kind (``modeled`` or ``measured``), and a flow arrow joins
it to the host slice that issued it.

Hooks
-----
The runtime calls into this module from four places, each a module-level ``None`` check when
no trace is active: :func:`hook` decorates ``Context.compile``, ``Context.load``,
``CompiledFunction.__call__`` and ``TensorProxy.cpu``; ``Session.execute`` hands each command
to :meth:`Tracer.execute`. Anything may add arguments to the innermost open slice of its thread
with :func:`annotate_current`; the compile cache records its outcome with one line inside
``Context.compile``: ``trace.annotate_current(cache="hit")`` (or ``"miss"``).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import IO, Any, ParamSpec, TypeVar

from .trace_writer import DEVICE_TRACKS, Slice, Tracer

__all__ = ["trace_scope", "trace_event", "annotate_current", "hook", "Tracer", "DEVICE_TRACKS"]

P = ParamSpec("P")
R = TypeVar("R")

#: The Tracer events go to, or None when tracing is off (the only check the hooks make).
active: Tracer | None = None

# Scopes entered and not yet left, innermost last; guarded by _scopes_lock.
_scopes: list[trace_scope] = []
_scopes_lock = threading.Lock()


class trace_scope:
    """Record a Perfetto trace of everything the SDK does inside the ``with`` block.

    Parameters
    ----------
    filename : str, path-like or None
        The trace file to write (``.pftrace`` by convention), or None to trace nothing, which
        also switches off an enclosing scope for the duration of this one.

    Raises
    ------
    TypeError
        ``filename`` is not a str, path-like or None.
    OSError
        On entering the scope: the file cannot be created (its directory is missing or not
        writable, or it names a directory); on leaving it: the trace could not be written
        (the message names the file). When the block itself raised, its exception goes on
        and the failed write is a ``RuntimeWarning`` instead.
    ValueError
        On entering the scope: an enclosing scope is already writing this file.
    ModuleNotFoundError
        The ``perfetto`` package is not installed.

    Notes
    -----
    Tracing is process-wide: events of every thread go to the innermost scope entered and not
    yet left (each thread on its own host track). Scopes nest: an inner scope takes over until
    it ends, then the enclosing one resumes (it holds nothing of the inner block). The file is
    created on entry and completed on exit, also when the block raises.
    """

    def __init__(self, filename: str | os.PathLike[str] | None):
        if filename is not None and not isinstance(filename, (str, os.PathLike)):
            raise TypeError("trace_scope() takes a file name (str or path-like) or None, not "
                            f"{type(filename).__name__}")
        path = None if filename is None else os.fspath(filename)
        if isinstance(path, bytes) or path == "":
            raise TypeError(f"trace_scope() takes a non-empty str file name, not {filename!r}")
        self.path: str | None = None if path is None else os.path.abspath(path)
        self.tracer: Tracer | None = None
        self._file: IO[bytes] | None = None
        self._state = "new"

    def __repr__(self) -> str:
        return f"trace_scope({self.path!r}, {self._state})"

    def __enter__(self) -> trace_scope:
        global active
        if self._state != "new":
            raise RuntimeError(f"{self!r} was already entered; create a new trace_scope")
        with _scopes_lock:
            if self.path is not None:
                if any(s.path == self.path for s in _scopes):
                    raise ValueError(f"trace_scope({self.path!r}): an enclosing trace_scope is "
                                     "already writing this file; give the inner one another "
                                     "name")
                self._open_file()
            _scopes.append(self)
            active = self.tracer
            self._state = "active"
        return self

    def _open_file(self) -> None:
        assert self.path is not None
        try:
            import perfetto.trace_builder.proto_builder  # noqa: F401
        except ImportError:
            raise ModuleNotFoundError(
                "trace_scope() writes Perfetto traces with the 'perfetto' package, which is "
                "not installed: pip install 'perfetto>=0.59'") from None
        try:
            self._file = open(self.path, "wb")  # closed in __exit__
        except OSError as exc:
            folder = os.path.dirname(self.path)
            reason = exc.strerror or str(exc)
            if not os.path.isdir(folder):
                reason = f"directory {folder!r} does not exist"
            raise type(exc)(exc.errno, f"trace_scope() cannot create the trace file "
                            f"{self.path!r}: {reason}; give a file name in an existing, "
                            "writable directory") from None
        self.tracer = Tracer(self.path, self._file)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        global active
        with _scopes_lock:
            if self in _scopes:
                _scopes.remove(self)
            active = _scopes[-1].tracer if _scopes else None
            self._state = "done"
        tracer, file = self.tracer, self._file
        if tracer is None or file is None:
            return
        error = tracer.error
        try:
            tracer.close()
        except OSError as failure:  # never let it replace the exception the block raised
            error = error or failure
        try:
            file.close()  # flushes its buffer: a full disk or a file-size limit shows here
        except OSError as failure:
            error = error or failure
        error = tracer.error or error
        if error is None:
            return
        message = (f"trace_scope() could not write the trace file {self.path!r}: "
                   f"{error.strerror or error}")
        if exc_type is None:
            raise OSError(error.errno, message) from error
        # The block's own exception goes on; the trace's failure is only a warning beside it.
        warnings.warn(message, RuntimeWarning, stacklevel=2)


class trace_event:
    """A named slice of the user's own on the calling thread's host track.

    A context manager (``with trace_event("step"): ...``) and a decorator (``@trace_event
    ("step")``, one slice per call). Commands and calls inside it nest in it, and its
    arguments add up their bytes and cycles. Does nothing when no :class:`trace_scope` is
    active.

    Parameters
    ----------
    name : str
        The slice's name.
    **args : int, float, bool or str
        Arguments shown with the slice (other values are shown as their ``str``).
    """

    def __init__(self, name: str, **args: Any):
        if not isinstance(name, str) or not name:
            raise TypeError(f"trace_event() takes a non-empty str name, not {name!r}")
        self.name = name
        self.args = args
        # Per thread, one entry per entry into the block still open.
        self._local = threading.local()

    def _entries(self) -> list[tuple[Tracer | None, Slice | None]]:
        entries = getattr(self._local, "entries", None)
        if entries is None:
            entries = self._local.entries = []
        return entries

    def __enter__(self) -> trace_event:
        tracer = active
        opened = tracer.begin(self.name, "user", self.args) if tracer is not None else None
        self._entries().append((tracer, opened))
        return self

    def __exit__(self, *exc: object) -> None:
        tracer, opened = self._entries().pop()
        if tracer is not None:
            tracer.end(opened)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            with trace_event(self.name, **self.args):
                return fn(*args, **kwargs)
        return traced


def annotate_current(**args: Any) -> bool:
    """Add ``args`` to the innermost open slice of the calling thread (shown when it ends).

    Returns False, doing nothing, when no trace is active or no slice is open. This is how a
    part of the runtime labels its slice, e.g. the compile cache inside ``Context.compile``:
    ``trace.annotate_current(cache="hit")``.
    """
    tracer = active
    if tracer is None:
        return False
    return tracer.annotate(args)


# -- the runtime's hooks ----------------------------------------------------------------------

def _first(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _compile_name(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict]:
    fn = _first(args, kwargs, 1, "fn")
    label = getattr(fn, "__name__", type(fn).__name__)
    return f"compile {label}", {"codegen_dir": str(_first(args, kwargs, 3, "codegen_dir"))}


def _load_name(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict]:
    where = str(_first(args, kwargs, 1, "codegen_dir"))
    return f"load {os.path.basename(where.rstrip(os.sep)) or where}", {"codegen_dir": where}


def _call_name(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict]:
    return args[0].name, {"function": args[0].key}


def _read_name(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict]:
    return f"{args[0].spec.name}.cpu()", {}


def _write_name(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict]:
    return f"{args[0].spec.name}.load_from()", {}


_NAMERS: dict[str, Callable[[tuple[Any, ...], Mapping[str, Any]], tuple[str, dict]]] = {
    "compile": _compile_name, "load": _load_name, "call": _call_name, "transfer": _read_name,
    "upload": _write_name,
}


def hook(kind: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a runtime method so that each call is a slice of category ``kind``
    (``"compile"``, ``"load"``, ``"call"``, ``"transfer"`` (a ``.cpu()``) or ``"upload"`` (a
    ``load_from``)) when a trace is active."""
    namer = _NAMERS[kind]

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            tracer = active
            if tracer is None:
                return fn(*args, **kwargs)
            try:
                name, extra = namer(args, kwargs)
            except Exception:  # a bad call: the method itself reports it
                name, extra = kind, {}
            opened = tracer.begin(name, kind, extra)
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                if opened is not None:
                    opened.args["error"] = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                tracer.end(opened)
        return traced
    return wrap
