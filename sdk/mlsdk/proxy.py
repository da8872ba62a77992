"""TensorProxy: a tensor that lives in device DRAM (or, on pfvm:cpu, on the host): its data is
a :class:`~mlsdk.stores.ProxyStorage` (a DRAM buffer or a host tensor).

Besides the outputs of calls, :func:`allocate_input_proxies` (behind
``CompiledFunction.allocate_input_proxy()``) hands out empty proxies in a function's input
specs, which :meth:`TensorProxy.load_from` fills from the host ahead of the call (see
``docs/transfers.md``).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import torch
from mncore_hdl.layout import dtype_name

from . import trace as _trace
from .device.commands import Buffer
from .errors import (
    InputError,
    IOSpecMismatchError,
    StaleTensorError,
)
from .iospec import IOSpec
from .session import Session
from .stores import DeviceStorage, ProxyStorage, proxy_storage

__all__ = ["TensorProxy", "allocate_input_proxies"]


class TensorProxy:
    """A tensor on the device: a compiled function's output, or an allocated input.

    Pass it to another compiled function to hand the data over on the device (a relocation
    when the specs are memcopyable, a layout conversion otherwise), or call :meth:`cpu` to
    read it back. :meth:`load_from` overwrites its data from the host. Its buffer is freed when
    the proxy is garbage-collected, or by :meth:`free`.

    Attributes
    ----------
    spec : IOSpec
        Shape, dtype and layout of the data.
    origin : str or None
        For a proxy from ``allocate_input_proxy()``, the input it was allocated for (e.g.
        ``"input 'x' of mlp#1"``); None for a call's output.
    producer : tuple of str or None
        For a call's output, the ``(name, key)`` of the compiled function that returned it;
        None for any other proxy.

    Parameters
    ----------
    session : Session
        The open device the data lives on (held weakly).
    spec : IOSpec
        Shape, dtype and layout of the data.
    storage : ProxyStorage or Buffer
        Where the data is (:mod:`mlsdk.stores`); a Buffer stands for a
        :class:`~mlsdk.stores.DeviceStorage` the proxy owns (gives back when collected).
    origin : str, optional
        See the attribute.
    empty : bool
        An allocated input proxy, holding no data until its first :meth:`load_from`.
    producer : tuple of str, optional
        For a call's output, the ``(name, key)`` of the compiled function that returned it
        (:func:`mlsdk.compiled.producer_of`).
    """

    def __init__(self, session: Session, spec: IOSpec, storage: ProxyStorage | Buffer, *,
                 origin: str | None = None, empty: bool = False,
                 producer: tuple[str, str] | None = None):
        self._session = weakref.ref(session)
        self.producer = producer
        self.spec = spec
        self._storage: ProxyStorage = (DeviceStorage(storage) if isinstance(storage, Buffer)
                                       else storage)
        self.origin = origin
        self._freed = False
        self._empty = empty
        self._finalizer = self._storage.finalizer(self, session)

    @property
    def buffer(self) -> Buffer | None:
        """The device buffer (``group``, ``address`` in LW, ``nbytes``); None on
        ``pfvm:cpu``."""
        return self._storage.buffer

    @property
    def storage(self) -> ProxyStorage:
        """Where the data is (:mod:`mlsdk.stores`): the device buffer (:attr:`buffer`), or on
        the host reference the tensor it holds on its torch device (``storage.tensor``, not a
        copy)."""
        return self._storage

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self.spec.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.spec.dtype

    @property
    def session(self) -> Session | None:
        """The session the proxy's data lives in; None once that is collected."""
        return self._session()

    @property
    def loaded(self) -> bool:
        """False for an allocated input proxy before its first :meth:`load_from`."""
        return not self._empty

    def __repr__(self) -> str:
        where = self._storage.where()
        state = " (freed)" if self._freed else " (empty)" if self._empty else ""
        return (f"TensorProxy({self.spec.name!r}, shape={tuple(self.spec.shape)}, "
                f"dtype={self.spec.dtype_name}, at {where}){state}")

    # -- checks -----------------------------------------------------------------------------

    def _check_live(self, session: Session | None) -> Session:
        """The proxy's session, when the proxy's buffer is still allocated in it."""
        own = self._session()
        if own is None:
            raise StaleTensorError(f"{self!r}: its Context no longer exists")
        if session is not None and own is not session:
            raise StaleTensorError(
                f"{self!r} belongs to another Context (on {own.name}, 0x{id(own):x}) "
                f"than the one it is used in (on {session.name}, 0x{id(session):x}): "
                "device data never crosses Contexts. Pass its .cpu() value "
                "instead, allocate input proxies from a function of this Context, or compile "
                "both functions in the same Context"
            )
        if self._freed or own.closed:
            raise StaleTensorError(f"{self!r}: its device buffer was freed")
        if not self._storage.is_live(own):
            raise StaleTensorError(f"{self!r}: its device buffer was freed")
        return own

    def check_usable(self, session: Session) -> None:
        """Raise StaleTensorError unless this proxy is live data of ``session`` (allocated
        input proxies: after their first :meth:`load_from`)."""
        self._check_live(session)
        if self._empty:
            raise StaleTensorError(
                f"{self!r} holds no data yet: it was allocated for {self.origin} and never "
                "loaded; call load_from(tensor) first"
            )

    def check_convertible_to(self, spec: IOSpec, where: str) -> None:
        """Raise IOSpecMismatchError if this proxy may not be converted into ``spec``.

        Outputs may be (a DRAM-to-DRAM conversion). An allocated input proxy exists so that a
        call moves nothing: it feeds only inputs its spec is memcopyable to.
        """
        if self.origin is None:
            return
        raise IOSpecMismatchError(
            f"{self!r} was allocated for {self.origin} as {self.spec}, but {where} expects "
            f"{spec}: they differ in {self.spec.describe_difference(spec)}. An allocated input "
            "proxy feeds only inputs whose spec it matches (a relocation), never through a "
            "conversion: allocate the proxies from the function you call "
            "(compiled.allocate_input_proxy()), or pass a host tensor"
        )

    # -- host <-> device --------------------------------------------------------------------

    @_trace.hook("transfer")
    def cpu(self) -> torch.Tensor:
        """Read the data back to a host tensor (a HostRead)."""
        return self._read(f"{self.spec.name}.cpu()")

    def _read(self, label: str) -> torch.Tensor:
        """The whole tensor on the host: one HostRead of the buffer, recorded as ``label``."""
        session = self._check_live(None)
        if self._empty:
            self.check_usable(session)  # raises
        return self._storage.read(session, self.spec, label)

    @_trace.hook("upload")
    def load_from(self, tensor: torch.Tensor, clone: bool = True) -> None:
        """Write host data into this proxy's buffer (a HostWrite, recorded as a ``write``).

        Parameters
        ----------
        tensor : torch.Tensor
            Of the proxy's shape and dtype (any strides, any torch device).
        clone : bool
            On the real SDK the write is asynchronous: ``clone=True`` snapshots ``tensor`` at
            this call, so it may be modified right after; ``clone=False`` may read it until
            the next synchronising call (a call's ``.cpu()``, ``Context.synchronize()``), so
            it must be left alone until then. This model writes at once, which satisfies both.

        Raises
        ------
        InputError
            ``tensor`` has another shape or dtype; the proxy's data is unchanged.
        StaleTensorError
            The proxy was freed, or its Context closed.
        """
        if not isinstance(clone, bool):
            raise TypeError(f"load_from(clone=...) takes a bool, not {clone!r}")
        if isinstance(tensor, TensorProxy):
            raise TypeError(
                f"{self!r}.load_from() takes a host torch.Tensor, not a TensorProxy: pass the "
                "proxy itself to the call (a relocation or conversion on the device), or "
                "load_from(proxy.cpu())")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{self!r}.load_from() takes a torch.Tensor, not "
                            f"{type(tensor).__name__}")
        spec = self.spec
        if tuple(tensor.shape) != spec.shape or tensor.dtype != spec.dtype:
            given = dtype_name(tensor.dtype)
            raise InputError(
                f"{self!r}.load_from() takes a {spec.dtype_name} tensor of shape {spec.shape}, "
                f"not {given} of shape {tuple(tensor.shape)}; its data is unchanged")
        session = self._check_live(None)
        self._storage.write(session, spec, tensor.detach().to("cpu"))
        self._empty = False

    # -- indexing and what torch tensors do: read back, or a clear error -------------------

    @_trace.hook("transfer")
    def __getitem__(self, key: Any) -> torch.Tensor:
        """``proxy[index]``: the indexed part as a host ``torch.Tensor`` (a HostRead).

        Basic indexing as torch's: integers (negative ones from the end), slices (any step
        above 0), ``...`` and ``None``, also 0-d integer tensors. The device cannot read part
        of a buffer, so the whole buffer is read back (one HostRead of ``buffer.nbytes``, the
        report's ``host`` bytes, recorded as ``name[index]``) and indexed on the host. To
        index the same result more than once, read it once with :meth:`cpu` and index that.

        Raises
        ------
        IndexError
            An index out of range, or more indices than dimensions.
        TypeError
            Another kind of index (a list, a bool or a non-scalar tensor): index ``.cpu()``.
        """
        index = _basic_index(key, self.shape, self.spec.name)
        return self._read(f"{self.spec.name}[{_index_text(key)}]")[index]

    def __len__(self) -> int:
        """The size of the first dimension (from the spec; no data moves)."""
        if not self.shape:
            raise TypeError(f"len() of a 0-d TensorProxy ({self.spec.name!r})")
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError(
            f"iterating over TensorProxy {self.spec.name!r} would read it from the device once "
            "per element: iterate over proxy.cpu() (one read)")

    def __bool__(self) -> bool:
        raise TypeError(
            f"the truth value of TensorProxy {self.spec.name!r} needs its data on the host: "
            "use proxy.cpu() (or proxy.item() for one element)")

    def _no_host_op(self, op: str) -> Any:
        raise TypeError(
            f"{op} on TensorProxy {self.spec.name!r}: a proxy is device data, not a "
            "torch.Tensor; read it first with proxy.cpu() (or pass the proxy to a compiled "
            "function, which runs on the device)")

    def __eq__(self, other: object) -> Any:
        if not _is_data(other):
            return NotImplemented  # identity, as for any object
        return self._no_host_op("==")

    def __ne__(self, other: object) -> Any:
        if not _is_data(other):
            return NotImplemented
        return self._no_host_op("!=")

    __hash__ = object.__hash__

    def __lt__(self, other: Any) -> Any:
        return self._no_host_op("<")

    def __le__(self, other: Any) -> Any:
        return self._no_host_op("<=")

    def __gt__(self, other: Any) -> Any:
        return self._no_host_op(">")

    def __ge__(self, other: Any) -> Any:
        return self._no_host_op(">=")

    def __add__(self, other: Any) -> Any:
        return self._no_host_op("+")

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self._no_host_op("-")

    __rsub__ = __sub__

    def __mul__(self, other: Any) -> Any:
        return self._no_host_op("*")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return self._no_host_op("/")

    __rtruediv__ = __truediv__

    def __matmul__(self, other: Any) -> Any:
        return self._no_host_op("@")

    __rmatmul__ = __matmul__

    def __neg__(self) -> Any:
        return self._no_host_op("unary -")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self._no_host_op("numpy conversion (np.asarray)")

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None,
                           ) -> Any:
        name = getattr(func, "__name__", str(func))
        given = [a for a in [*args, *(kwargs or {}).values()] if isinstance(a, TensorProxy)]
        which = f" ({given[0].spec.name!r})" if given else ""
        raise TypeError(
            f"torch.{name}() got a TensorProxy{which}: a proxy is device data, not a "
            "torch.Tensor; read it first with proxy.cpu() (or index it, proxy[...], which "
            "reads it back)")

    def item(self) -> bool | int | float:
        """The value of a one-element proxy as a Python number (a HostRead)."""
        count = self.shape.numel()
        if count != 1:
            raise ValueError(
                f"item() needs a one-element TensorProxy; {self.spec.name!r} has shape "
                f"{tuple(self.spec.shape)} ({count} elements): use .cpu() for the tensor")
        return self.cpu().item()

    def numpy(self) -> Any:
        """The data as a numpy array (``.cpu().numpy()``, a HostRead)."""
        if self.dtype == torch.bfloat16:
            raise TypeError(
                f"{self!r}: bfloat16 has no numpy dtype; use .cpu().float().numpy() for a "
                "float32 array")
        return self.cpu().numpy()

    def free(self) -> None:
        """Release the device buffer now; the proxy cannot be used afterwards."""
        if not self._freed and self._finalizer is not None:
            self._finalizer()
        self._freed = True
        self._storage.release()


def _is_data(value: object) -> bool:
    """A value ``==`` on a torch tensor compares element-wise: a tensor, array or number."""
    return (isinstance(value, (torch.Tensor, int, float, complex))
            or type(value).__module__ == "numpy")


def _basic_index(key: Any, shape: torch.Size, name: str) -> tuple[Any, ...]:
    """``key`` as a tuple of ints, slices, ``...`` and ``None``, checked against ``shape``
    (the checks torch would make on the host, made before any data moves)."""
    items = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for item in items:
        if item is Ellipsis or item is None:
            out.append(item)
        elif isinstance(item, slice):
            parts = [None if p is None else _as_int(p, name, key) for p in
                     (item.start, item.stop, item.step)]
            if parts[2] is not None and parts[2] <= 0:
                raise ValueError(f"TensorProxy {name!r}[{_index_text(key)}]: a slice step "
                                 f"must be positive (as in torch), not {parts[2]}")
            out.append(slice(*parts))
        else:
            out.append(_as_int(item, name, key))
    if sum(item is Ellipsis for item in out) > 1:
        raise IndexError(f"TensorProxy {name!r}[{_index_text(key)}]: an index can only have "
                         "a single ellipsis ('...')")
    indexed = sum(item is not None and item is not Ellipsis for item in out)
    if indexed > len(shape):
        raise IndexError(f"TensorProxy {name!r}[{_index_text(key)}]: too many indices for "
                         f"a tensor of {len(shape)} dimensions (shape {tuple(shape)})")
    # Integer indices against their dimension's size.
    at = 0
    for position, item in enumerate(out):
        if item is Ellipsis:
            at += len(shape) - indexed
            continue
        if item is None:
            continue
        if isinstance(item, int) and not -shape[at] <= item < shape[at]:
            raise IndexError(
                f"TensorProxy {name!r}[{_index_text(key)}]: index {item} (position "
                f"{position}) is out of range for dimension {at} of size {shape[at]}")
        at += 1
    return tuple(out)


def _as_int(value: Any, name: str, key: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dim() != 0):
        raise TypeError(
            f"TensorProxy {name!r}[{_index_text(key)}]: only basic indexing (integers, "
            "slices, '...', None) reads a proxy; for a boolean or tensor index, index its "
            "host copy: proxy.cpu()[...]")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"TensorProxy {name!r}[{_index_text(key)}]: only basic indexing (integers, "
            f"slices, '...', None) reads a proxy, not {type(value).__name__}; for other "
            "indices, index its host copy: proxy.cpu()[...]") from None


def _index_text(key: Any) -> str:
    """``key`` as written between brackets (``:, -3:``), for the report's record names."""
    def one(item: Any) -> str:
        if item is Ellipsis:
            return "..."
        if isinstance(item, slice):
            parts = ["" if p is None else str(_plain(p)) for p in
                     (item.start, item.stop, item.step)]
            text = f"{parts[0]}:{parts[1]}"
            return text + (f":{parts[2]}" if parts[2] else "")
        return str(_plain(item))
    items = key if isinstance(key, tuple) else (key,)
    return ", ".join(one(item) for item in items)


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return value.item()
    return value


def allocate_input_proxies(session: Session, specs: Mapping[str, IOSpec], key: str,
                           buffer_for: Callable[[IOSpec], Buffer | None],
                           ) -> dict[str, TensorProxy]:
    """One empty TensorProxy per input spec of function ``key``, keyed and ordered like
    ``specs``.

    ``buffer_for(spec)`` allocates each proxy's buffer (None on the host reference, whose
    proxies hold host tensors: :func:`~mlsdk.stores.proxy_storage`). All of them are
    allocated, or none: on failure the ones allocated so far are given back.
    """
    session.check_open()
    buffers: dict[str, Buffer | None] = {}
    with session.lock:
        try:
            for name, spec in specs.items():
                buffers[name] = buffer_for(spec)
        except BaseException:
            for buf in buffers.values():
                if buf is not None:
                    session.dram.free(buf)
            raise
    return {name: TensorProxy(session, spec, proxy_storage(buffers[name]), empty=True,
                              origin=f"input {name!r} of {key}")
            for name, spec in specs.items()}
