"""TensorProxy: a tensor that lives in device DRAM (or, on pfvm:cpu, on the host)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import torch
from mncore_hdl.layout import from_device

from . import trace as _trace
from .device.commands import Buffer, HostRead
from .errors import DeviceError, StaleTensorError
from .iospec import IOSpec

if TYPE_CHECKING:
    from .context import Context

__all__ = ["TensorProxy"]


class TensorProxy:
    """A compiled function's output, still on the device.

    Pass it to another compiled function to hand the data over on the device (a relocation
    when the specs are memcopyable, a layout conversion otherwise), or call :meth:`cpu` to
    read it back. Its buffer is freed when the proxy is garbage-collected, or by :meth:`free`.

    Attributes
    ----------
    spec : IOSpec
        Shape, dtype and layout of the data.
    buffer : Buffer or None
        The device buffer (``group``, ``address`` in LW, ``nbytes``); None on ``pfvm:cpu``.
    """

    def __init__(self, context: Context, spec: IOSpec, buffer: Buffer | None,
                 host: torch.Tensor | None = None):
        self._context = weakref.ref(context)
        self.spec = spec
        self.buffer = buffer
        self._host = host
        self._freed = False
        if buffer is not None:
            # release: a finalizer must never wait for the device lock.
            self._finalizer = weakref.finalize(self, context.device.release, buffer)

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self.spec.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.spec.dtype

    @property
    def context(self) -> Context | None:
        return self._context()

    def __repr__(self) -> str:
        where = str(self.buffer) if self.buffer is not None else "host"
        state = " (freed)" if self._freed else ""
        return (f"TensorProxy({self.spec.name!r}, shape={tuple(self.spec.shape)}, "
                f"dtype={self.spec.dtype_name}, at {where}){state}")

    def check_usable(self, context: Context) -> None:
        """Raise StaleTensorError unless this proxy is live data of ``context``."""
        if self._context() is not context:
            raise StaleTensorError(
                f"{self!r} belongs to another Context; pass its .cpu() value instead, or "
                "compile both functions in the same Context"
            )
        if self._freed or context.closed:
            raise StaleTensorError(f"{self!r}: its device buffer was freed")
        if self.buffer is not None and not context.device.is_live(self.buffer):
            raise StaleTensorError(f"{self!r}: its device buffer was freed")

    @_trace.hook("transfer")
    def cpu(self) -> torch.Tensor:
        """Read the data back to a host tensor (a HostRead)."""
        context = self._context()
        if context is None:
            raise StaleTensorError(f"{self!r}: its Context no longer exists")
        self.check_usable(context)
        if self._host is not None:
            return self._host.clone()
        if self.buffer is None:
            raise StaleTensorError(f"{self!r} holds no data")
        with context.device.lock:
            record = context._new_record(f"{self.spec.name}.cpu()", kind="read")
            result = context._execute(HostRead(self.buffer), record)
        if result.data is None:
            raise DeviceError(f"The device returned no data for HostRead of {self.buffer}")
        return from_device(result.data, self.spec.layout)

    def free(self) -> None:
        """Release the device buffer now; the proxy cannot be used afterwards."""
        if not self._freed and self.buffer is not None:
            self._finalizer()
        self._freed = True
        self._host = None
