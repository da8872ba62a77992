"""Where the front end's data lives, behind one interface per use: in device DRAM, or on the
host reference (``pfvm:cpu``, a device without memory) in host tensors.

- :class:`ProxyStorage`: a TensorProxy's data, a :class:`DeviceStorage` (a DRAM buffer) or a
  :class:`HostStorage` (a host tensor);
- :class:`StateStore`: the copies the :class:`~mlsdk.registry.Registry` keeps of registered
  tensors, one per layout, made, read, overwritten and dropped by a
  :class:`DeviceStateStore` (DRAM buffers, moved by HostWrite and HostRead) or a
  :class:`HostStateStore` (host snapshots);
- :func:`state_store`: the store a device's capabilities call for, picked by the Context as it
  picks the function class.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Protocol

import torch
from mncore_hdl.layout import Layout, from_device, to_device

from ._values import input_bytes
from .device.commands import Buffer, HostRead, HostWrite
from .errors import DeviceError, StaleTensorError
from .iospec import IOSpec
from .session import Session

if TYPE_CHECKING:
    from .report import CallRecord

__all__ = ["DeviceStateStore", "DeviceStorage", "HostStateStore", "HostStorage",
           "ProxyStorage", "StateStore", "proxy_storage", "state_store"]


# -- a TensorProxy's data -----------------------------------------------------------------------


class ProxyStorage(Protocol):
    """A TensorProxy's data: where it is, and how to read and write it."""

    #: The DRAM buffer holding the data; None when the data is a host tensor.
    buffer: Buffer | None

    def where(self) -> str:
        """Where the data is, as a proxy's ``repr`` shows it."""

    def is_live(self, session: Session) -> bool:
        """False once the data's device memory was given back."""

    def finalizer(self, owner: object, session: Session) -> weakref.finalize | None:
        """What gives the memory back when ``owner`` (the proxy) is collected, or None."""

    def read(self, session: Session, spec: IOSpec, label: str) -> torch.Tensor:
        """The whole tensor on the host (a HostRead recorded as ``label``)."""

    def write(self, session: Session, spec: IOSpec, data: torch.Tensor) -> None:
        """Overwrite the data with host tensor ``data`` (of the spec's shape and dtype)."""

    def release(self) -> None:
        """Forget the data (after the proxy's :meth:`~mlsdk.TensorProxy.free`)."""


class DeviceStorage:
    """Data in a DRAM buffer of the session's device. ``owned``: the proxy gives the buffer
    back when it is collected or freed (a registry copy's proxy does not own its buffer)."""

    def __init__(self, buffer: Buffer, owned: bool = True):
        self.buffer: Buffer | None = buffer
        self._buffer = buffer
        self.owned = owned

    def where(self) -> str:
        return str(self._buffer)

    def is_live(self, session: Session) -> bool:
        return session.dram.is_live(self._buffer)

    def finalizer(self, owner: object, session: Session) -> weakref.finalize | None:
        if not self.owned:
            return None
        # release: a finalizer must never wait for the device lock.
        return weakref.finalize(owner, session.dram.release, self._buffer)

    def read(self, session: Session, spec: IOSpec, label: str) -> torch.Tensor:
        with session.lock:
            record = session.new_record(label, kind="read")
            return session.read_tensor(self._buffer, spec.layout, record)

    def write(self, session: Session, spec: IOSpec, data: torch.Tensor) -> None:
        # A tensor whose own bytes are the image goes as itself, as a call's input does (the
        # functional model keeps a copy-on-write clone of it: docs/model.md).
        image = input_bytes(data, spec.layout)
        command = (HostWrite(self._buffer, image, data, spec.layout) if image is not None
                   else HostWrite(self._buffer, to_device(data, spec.layout)))
        with session.lock:
            record = session.new_record(f"{spec.name}.load_from()", kind="write")
            session.execute(command, record)

    def release(self) -> None:
        """The buffer goes back through the finalizer; nothing more to forget."""


class HostStorage:
    """Data in a host tensor (of the host reference's torch device); None until an allocated
    input proxy is first loaded."""

    buffer: Buffer | None = None

    def __init__(self, tensor: torch.Tensor | None = None):
        self.tensor = tensor

    def where(self) -> str:
        return "host"

    def is_live(self, session: Session) -> bool:
        return True

    def finalizer(self, owner: object, session: Session) -> weakref.finalize | None:
        return None

    def read(self, session: Session, spec: IOSpec, label: str) -> torch.Tensor:
        if self.tensor is None:
            raise StaleTensorError(f"TensorProxy {spec.name!r} holds no data")
        # A copy on the host, also of a result held on pfvm:cuda's GPU.
        return self.tensor.to("cpu", copy=True)

    def write(self, session: Session, spec: IOSpec, data: torch.Tensor) -> None:
        # A private copy, so later changes to ``data``'s source never show.
        self.tensor = data.clone(memory_format=torch.contiguous_format)

    def release(self) -> None:
        self.tensor = None


def proxy_storage(buffer: Buffer | None) -> ProxyStorage:
    """The storage of an allocated input proxy: its buffer, or (``None``, a device without
    memory) an empty host tensor."""
    return HostStorage() if buffer is None else DeviceStorage(buffer)


# -- the registry's copies of registered tensors ------------------------------------------------


class StateStore(Protocol):
    """Makes, reads, overwrites and drops the copies of registered tensors; a copy is what
    :meth:`upload` returns (a DRAM buffer, or a host tensor). The device's moves are recorded
    in ``record``, or in a record of their own when it is None."""

    def upload(self, session: Session, name: str, value: torch.Tensor, layout: Layout,
               record: CallRecord | None) -> Any:
        """A new copy of registered tensor ``name`` holding host ``value`` in ``layout``."""

    def read(self, session: Session, name: str, copy: Any, layout: Layout,
             record: CallRecord | None) -> torch.Tensor:
        """``copy``'s value on the host."""

    def overwrite(self, session: Session, name: str, copy: Any, value: torch.Tensor,
                  layout: Layout, record: CallRecord | None) -> CallRecord | None:
        """Write host ``value`` into ``copy``; the record used (for the next copy)."""

    def drop(self, session: Session, copy: Any) -> None:
        """Give ``copy``'s memory back."""

    def proxy_storage(self, copy: Any) -> ProxyStorage:
        """The storage of a TensorProxy over ``copy`` (which the registry keeps owning)."""


class DeviceStateStore:
    """Copies in device DRAM: an upload is a HostWrite into a new buffer, a read a HostRead,
    each counted as registered state in the record."""

    def upload(self, session: Session, name: str, value: torch.Tensor, layout: Layout,
               record: CallRecord | None) -> Buffer:
        buffer = session.dram.allocate(layout, f"registered state {name!r}")
        try:
            if record is None:
                record = session.new_record(f"registry {name}", kind="load")
            result = session.execute(HostWrite(buffer, to_device(value, layout)), record)
        except BaseException:
            session.dram.free(buffer)
            raise
        record.add_state(result, name)
        return buffer

    def read(self, session: Session, name: str, copy: Buffer, layout: Layout,
             record: CallRecord | None) -> torch.Tensor:
        if record is None:
            record = session.new_record("Context.synchronize()", kind="read")
        result = session.execute(HostRead(copy), record)
        record.add_state(result, name)
        if result.data is None:
            raise DeviceError(f"The device returned no data for HostRead of {copy}")
        return from_device(result.data, layout)

    def overwrite(self, session: Session, name: str, copy: Buffer, value: torch.Tensor,
                  layout: Layout, record: CallRecord | None) -> CallRecord | None:
        if record is None:
            record = session.new_record(f"registry {name}", kind="load")
        result = session.execute(HostWrite(copy, to_device(value, layout)), record)
        record.add_state(result, name)
        return record

    def drop(self, session: Session, copy: Buffer) -> None:
        session.dram.free(copy)

    def proxy_storage(self, copy: Buffer) -> ProxyStorage:
        return DeviceStorage(copy, owned=False)


class HostStateStore:
    """Copies as host snapshots (the host reference): nothing moves and nothing is recorded."""

    def upload(self, session: Session, name: str, value: torch.Tensor, layout: Layout,
               record: CallRecord | None) -> torch.Tensor:
        return value.clone()

    def read(self, session: Session, name: str, copy: torch.Tensor, layout: Layout,
             record: CallRecord | None) -> torch.Tensor:
        return copy

    def overwrite(self, session: Session, name: str, copy: torch.Tensor, value: torch.Tensor,
                  layout: Layout, record: CallRecord | None) -> CallRecord | None:
        copy.copy_(value)  # in place: a proxy over the snapshot sees the new value
        return record

    def drop(self, session: Session, copy: torch.Tensor) -> None:
        """A snapshot has no device memory to give back."""

    def proxy_storage(self, copy: torch.Tensor) -> ProxyStorage:
        return HostStorage(copy)


def state_store(has_memory: bool) -> StateStore:
    """The store of a device with (``has_memory``) or without device memory."""
    return DeviceStateStore() if has_memory else HostStateStore()
