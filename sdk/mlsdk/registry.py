"""Module state that lives on the device: the registry of a Context (tensor names are
:mod:`mlsdk.naming`).

A registered tensor (a module's parameter or buffer) has one device copy per layout it is
read in, owned by the Context's :class:`Registry` and shared by every compiled function of
that Context that closes over the tensor. A copy is uploaded once, by the first load, call or
:meth:`Registry.value_proxy` that needs it, and stays on the device until
:meth:`Registry.invalidate`. The registry's :class:`~mlsdk.stores.StateStore` makes, reads and
drops the copies (DRAM buffers, or host snapshots on the host reference). See
``docs/registry.md``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from mncore_compiler.ir import TensorType
from mncore_compiler.types import dtype_to_torch
from mncore_hdl.layout import (
    Layout,
    LayoutError,
    dtype_name,
    native_layout,
)

from .device.commands import Buffer
from .errors import DeviceError
from .iospec import IOSpec
from .naming import (
    RegistrationError,
    check_tensor,
    get_tensor_name,
    module_tensors,
    set_tensor_name,
)
from .proxy import TensorProxy
from .session import Session
from .stores import StateStore

if TYPE_CHECKING:
    from mncore_compiler.program import DeviceProgram

    from .device.base import Device
    from .report import CallRecord

__all__ = ["Registry"]


def _describe(tensor: torch.Tensor) -> str:
    dtype = dtype_name(tensor.dtype)
    return f"a {dtype} tensor of shape {tuple(tensor.shape)}"


# -- the registry -------------------------------------------------------------------------------


@dataclass(eq=False)
class _Entry:
    """One registered tensor and its copies, one per layout (what the registry's
    :class:`~mlsdk.stores.StateStore` made: a device Buffer, or a host snapshot). ``dirty`` is
    the layout of a copy the device wrote since the host tensor was last brought up to date."""

    name: str
    tensor: torch.Tensor
    kind: str
    copies: dict[Layout, Any] = field(default_factory=dict)
    dirty: Layout | None = None


class Registry:
    """The registered parameters and buffers of one Context, and their device copies.

    Reach it as ``context.registry``. It holds each registered tensor (strongly: the
    Context may need to upload it again after :meth:`invalidate`, or update it in place in
    :meth:`synchronize`).

    Parameters
    ----------
    session : Session
        The open device the copies live on (held weakly: the Context owns it).
    store : StateStore
        Makes, reads, overwrites and drops the copies; the Context picks it by the device's
        capabilities (:func:`mlsdk.stores.state_store`).

    Notes
    -----
    A registered tensor has one device copy per layout a compiled function reads it in (for
    one model compiled with two ``float_dtype`` options, a float32 and a float16 copy). Copies
    stay coherent: a copy the device wrote (:meth:`mark_written`) is the only one kept, and
    the host tensor is brought up to date from it before any other copy is made.
    """

    def __init__(self, session: Session, store: StateStore):
        self._session = weakref.ref(session)
        self._store = store
        self._entries: dict[str, _Entry] = {}
        self._by_id: dict[int, _Entry] = {}
        # Host-side refreshers run before each call that reads state (weak: an optimizer's
        # bound _mncore_refresh does not keep the optimizer alive).
        self._refreshers: list[weakref.WeakMethod[Callable[[], Iterable[torch.Tensor]]]] = []
        #: How ``register(name, optimizer)`` registers an optimizer (set by the Context: its
        #: :class:`mlsdk.backprop.RegisteredOptimizers`, which sits above this module).
        self.optimizer_registrar: Callable[[Registry, str, torch.optim.Optimizer],
                                           list[str]] | None = None

    def __repr__(self) -> str:
        return f"Registry({len(self._entries)} registered tensor(s))"

    @property
    def store(self) -> StateStore:
        """What makes, reads and drops the copies (:mod:`mlsdk.stores`)."""
        return self._store

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        """The registered names, in registration order."""
        return iter(list(self._entries))

    def __contains__(self, item: object) -> bool:
        """True for a registered name or a registered tensor."""
        if isinstance(item, torch.Tensor):
            return self.name_of(item) is not None
        return isinstance(item, str) and item in self._entries

    # -- registering ------------------------------------------------------------------------

    def register(self, name: str,
                 module: torch.nn.Module | torch.optim.Optimizer) -> list[str]:
        """Name every parameter and buffer of ``module`` ``name.<qualified name>`` (see
        :func:`set_tensor_name_in_module`) and register them; return the names.

        Registering the same module under the same name again does nothing. Nothing is named
        or registered when any of its tensors cannot be (RegistrationError).

        ``module`` may also be a ``torch.optim`` optimizer (SGD, Adam, AdamW or an MNCore
        one) whose parameters are registered: its state is registered as ``name.<param>.<key>``
        and ``compile(..., optimizers=[optimizer], options={"backprop": True})`` steps it
        (:mod:`mlsdk.backprop`).
        """
        if isinstance(module, torch.optim.Optimizer):
            if self.optimizer_registrar is None:
                raise RegistrationError("This registry registers no optimizers (it belongs to "
                                        "no Context)")
            return self.optimizer_registrar(self, name, module)
        items = module_tensors(module, name)
        self._check_all(items)
        for qualified, tensor, _ in items:
            set_tensor_name(tensor, qualified)
        return self.register_named(items)

    def register_tensor(self, tensor: torch.Tensor, kind: str = "parameter") -> str:
        """Register one named tensor (``kind``: ``"parameter"`` or ``"buffer"``); return its
        name. Registering it again does nothing."""
        check_tensor(tensor, f"The {kind} to register")
        name = get_tensor_name(tensor)
        if name is None:
            raise RegistrationError(
                f"Cannot register this {kind} ({_describe(tensor)}): it has no name. Name it "
                "first with set_tensor_name(tensor, 'model.weight') or "
                "set_tensor_name_in_module(model, 'model'), or register its whole module "
                "with context.registry.register('model', model)"
            )
        self.register_named([(name, tensor, kind)])
        return name

    def register_named(self, items: Iterable[tuple[str, torch.Tensor, str]]) -> list[str]:
        """Register each ``(name, tensor, kind)`` under its name, all or none: nothing is
        registered when any of them clashes with a registered tensor (RegistrationError).
        Return the names. A tensor registered again under its own name is left as it is.
        """
        items = list(items)
        self._check_all(items)
        for name, tensor, kind in items:
            self._add(tensor, name, kind)
        return [name for name, _, _ in items]

    def _check_all(self, items: list[tuple[str, torch.Tensor, str]]) -> None:
        for name, tensor, _ in items:
            self._check_new(tensor, name)

    def _check_new(self, tensor: torch.Tensor, name: str) -> None:
        entry = self._by_id.get(id(tensor))
        if entry is not None:
            if entry.name != name:
                raise RegistrationError(
                    f"This tensor is already registered as {entry.name!r}; it cannot be "
                    f"registered again as {name!r} (a tensor has one registered name)"
                )
            return
        other = self._entries.get(name)
        if other is not None:
            raise RegistrationError(
                f"Another tensor ({_describe(other.tensor)}) is already registered under the "
                f"name {name!r}; cannot register {_describe(tensor)} under it too. Give each "
                "tensor its own name, e.g. register each model under its own prefix"
            )

    def _add(self, tensor: torch.Tensor, name: str, kind: str) -> None:
        if name not in self._entries:
            entry = _Entry(name, tensor, kind)
            self._entries[name] = entry
            self._by_id[id(tensor)] = entry

    # -- lookup -----------------------------------------------------------------------------

    def name_of(self, tensor: torch.Tensor) -> str | None:
        """The name ``tensor`` is registered under in this Context; None when it is not."""
        entry = self._by_id.get(id(tensor))
        return entry.name if entry is not None and entry.tensor is tensor else None

    def tensor(self, name: str) -> torch.Tensor:
        """The host tensor registered under ``name``."""
        return self._entry(name).tensor

    def tensor_ids(self) -> dict[int, str]:
        """``id`` of every registered tensor -> its name (what the compiler's capture takes
        to tell registered state from program constants)."""
        return {id(e.tensor): e.name for e in self._entries.values()}

    def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(name)
        if entry is None:
            raise RegistrationError(f"No tensor is registered under the name {name!r}; "
                                    f"registered names are {list(self._entries)}")
        return entry

    def _entry_of(self, tensor: object) -> _Entry:
        check_tensor(tensor, "The registered tensor")
        assert isinstance(tensor, torch.Tensor)
        name = self.name_of(tensor)
        if name is None:
            named = get_tensor_name(tensor)
            called = f" named {named!r}" if named is not None else ""
            raise RegistrationError(
                f"This tensor ({_describe(tensor)}{called}) is not registered in this Context; "
                "register it with context.register_param(p) / context.register_buffer(b), or "
                "its module with context.registry.register('model', model)"
            )
        return self._entries[name]

    def check_program(self, program: DeviceProgram) -> None:
        """Raise RegistrationError unless every registered tensor ``program`` reads is
        registered here, with the shape it was compiled for."""
        for constant, name in program.state.items():
            entry = self._entries.get(name)
            if entry is None:
                raise RegistrationError(
                    f"{program.name} reads the registered tensor {name!r} (its constant "
                    f"{constant!r}), which is not registered in this Context; register its "
                    f"module first (context.registry.register({name.split('.')[0]!r}, model))"
                )
            want = tuple(program.graph.constants[constant].shape)
            if tuple(entry.tensor.shape) != want:
                raise RegistrationError(
                    f"{program.name} was compiled for a registered tensor {name!r} of shape "
                    f"{want}, but {_describe(entry.tensor)} is registered under that name"
                )
        for name in program.state_writes:
            if name not in self._entries:
                raise RegistrationError(
                    f"{program.name} updates the registered tensor {name!r}, which is not "
                    "registered in this Context; register it (and its module) first")

    # -- copies -----------------------------------------------------------------------------

    def device_buffers(self, program: DeviceProgram, record: CallRecord) -> dict[str, Buffer]:
        """Constant name -> the buffer of its registered device copy, for each registered
        constant of ``program``; copies not on the device yet are uploaded into ``record``."""
        with self._device().lock:
            return {c: self._copy(self._entry(n), program.layouts[c], record)
                    for c, n in program.state.items()}

    def state_write_buffers(self, program: DeviceProgram,
                            record: CallRecord) -> dict[str, Buffer]:
        """Output name -> the device copy a training step's Launch stores that state update
        into: the copy it reads the tensor from (uploaded now if it has none yet)."""
        with self._device().lock:
            return {out: self._copy(self._entry(n), program.output_layouts[out], record)
                    for n, out in program.state_writes.items()}

    def commit_writes(self, program: DeviceProgram,
                      values: dict[str, torch.Tensor] | None = None) -> None:
        """After a training step ran: each tensor it updated is written (:meth:`mark_written`)
        in the layout it was stored in. On the host reference, ``values`` (output name -> new
        value) become the host copies."""
        with self._device().lock:
            for name, out in program.state_writes.items():
                layout = program.output_layouts[out]
                if values is not None:
                    self._entry(name).copies[layout] = values[out]
                else:
                    entry = self._entries.get(name)
                    if (entry is not None and entry.dirty == layout
                            and len(entry.copies) == 1):
                        continue  # written in this layout, its only copy: already so marked
                self.mark_written(name, layout)

    def host_values(self, program: DeviceProgram) -> dict[str, torch.Tensor]:
        """:meth:`device_buffers` for the host reference: constant name -> the registry's
        host copy (a snapshot taken at first use, as a device copy is uploaded)."""
        with self._device().lock:
            return {c: self._copy(self._entry(n), program.layouts[c], None)
                    for c, n in program.state.items()}

    def _copy(self, entry: _Entry, layout: Layout, record: CallRecord | None) -> Any:
        copy = entry.copies.get(layout)
        if copy is not None:
            return copy
        if entry.dirty is not None:
            self._read_back(entry, record)
        value = entry.tensor.detach().to(dtype_to_torch(layout.dtype)).contiguous()
        copy = self._store.upload(self._live_session(), entry.name, value, layout, record)
        entry.copies[layout] = copy
        return copy

    def _read_back(self, entry: _Entry, record: CallRecord | None) -> None:
        """Bring ``entry``'s host tensor up to date from its dirty copy, in place."""
        assert entry.dirty is not None
        layout = entry.dirty
        value = self._store.read(self._live_session(), entry.name, entry.copies[layout],
                                 layout, record)
        with torch.no_grad():
            entry.tensor.copy_(value.to(entry.tensor.device))
        entry.dirty = None

    def value_proxy(self, tensor: torch.Tensor) -> TensorProxy:
        """The TensorProxy of ``tensor``'s device copy (uploaded now if there is none yet, in
        the compute-native layout of its dtype). The proxy does not own the copy: freeing or
        collecting it leaves the copy on the device; :meth:`invalidate` makes it stale."""
        entry = self._entry_of(tensor)
        session = self._live_session()
        with session.lock:
            layout = entry.dirty or next(iter(entry.copies), None)
            if layout is None:
                layout = self._native_layout(entry)
            copy = self._copy(entry, layout, None)
        spec = IOSpec(entry.name, tuple(entry.tensor.shape), dtype_to_torch(layout.dtype), layout)
        # The registry keeps owning the copy.
        return TensorProxy(session, spec, self._store.proxy_storage(copy))

    def _native_layout(self, entry: _Entry) -> Layout:
        session = self._live_session()
        try:
            dtype = TensorType.of(entry.tensor).dtype
            return native_layout(tuple(entry.tensor.shape), dtype, session.device.config)
        except (TypeError, ValueError, LayoutError) as exc:
            raise RegistrationError(f"Registered tensor {entry.name!r} ({_describe(entry.tensor)})"
                                    f" has no device layout: {exc}") from None

    # -- host-side updates (an optimizer's learning rate) ---------------------------------

    def add_refresh(self, refresh: Callable[[], Iterable[torch.Tensor]]) -> None:
        """Run the bound method ``refresh`` before each compiled call that reads registered
        state (:meth:`before_call`); it returns the registered host tensors it changed, which
        are then re-uploaded (:meth:`update_from_host`). Held weakly; adding it twice does
        nothing. ``mlsdk.optim`` adds each MNCore optimizer's ``_mncore_refresh``."""
        if any(ref() == refresh for ref in self._refreshers):
            return
        self._refreshers.append(weakref.WeakMethod(refresh))  # type: ignore[arg-type]

    def before_call(self, program: DeviceProgram) -> None:
        """Before a call of ``program``: when it reads registered state, run the refreshers
        and push the host tensors they changed to their device copies."""
        if not program.state or not self._refreshers:
            return
        for ref in list(self._refreshers):
            refresh = ref()
            if refresh is None:
                self._refreshers.remove(ref)
                continue
            for tensor in refresh():
                self.update_from_host(tensor)

    def update_from_host(self, tensor: torch.Tensor) -> None:
        """Write the host value of registered ``tensor`` into each of its copies (a
        ``HostWrite`` per device copy, counted as registered state); a device write not yet
        brought back by :meth:`synchronize` is overwritten. Without copies, nothing moves:
        the next use uploads the host value."""
        entry = self._entry_of(tensor)
        session = self._live_session()
        with session.lock:
            record = None
            for layout, copy in entry.copies.items():
                value = entry.tensor.detach().to(dtype_to_torch(layout.dtype)).contiguous()
                record = self._store.overwrite(session, entry.name, copy, value, layout, record)
            entry.dirty = None

    # -- coherence --------------------------------------------------------------------------

    def mark_written(self, name: str, layout: Layout | None = None) -> None:
        """Record that the device wrote the copy of ``name`` in ``layout`` (default: its only
        copy): the host tensor is stale until :meth:`synchronize`.

        The hook for device programs that update state in place (a training step). The other
        copies of ``name`` are dropped; one is made again, from the host tensor brought up
        to date first, when a function needs it.
        """
        entry = self._entry(name)
        with self._device().lock:
            if layout is None:
                if len(entry.copies) != 1:
                    raise ValueError(f"{name!r} has {len(entry.copies)} device copies; say "
                                     "which layout was written")
                layout = next(iter(entry.copies))
            if layout not in entry.copies:
                raise ValueError(f"{name!r} has no device copy in layout {layout}; its copies "
                                 f"are in {[str(k) for k in entry.copies]}")
            if entry.dirty not in (None, layout):
                self._read_back(entry, None)
            for other in [k for k in entry.copies if k != layout]:
                self._drop(entry, other)
            entry.dirty = layout

    def synchronize(self) -> int:
        """Bring every registered host tensor the device wrote up to date, in place (under
        ``torch.no_grad()``); return how many were updated."""
        dirty = [e for e in self._entries.values() if e.dirty is not None]
        if not dirty:
            return 0
        session = self._live_session()
        with session.lock:
            record = session.new_record("Context.synchronize()", kind="read")
            for entry in dirty:
                self._read_back(entry, record)
        return len(dirty)

    def invalidate(self) -> None:
        """Drop every device copy: the next use uploads the host tensors again. Device writes
        not yet brought back by :meth:`synchronize` are discarded."""
        device = self._device()
        with device.lock:
            for entry in self._entries.values():
                for layout in list(entry.copies):
                    self._drop(entry, layout)
                entry.dirty = None

    def _drop(self, entry: _Entry, layout: Layout) -> None:
        self._store.drop(self._live_session(), entry.copies.pop(layout))

    # -- the owner --------------------------------------------------------------------------

    def _live_session(self) -> Session:
        session = self._session()
        if session is None:
            raise DeviceError("The Context of this registry no longer exists")
        session.check_open()
        return session

    def _device(self) -> Device:
        return self._live_session().device
