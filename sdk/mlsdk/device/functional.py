"""The functional model: numpy DRAM per Group and analytic timing from the architecture config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor, Layout, from_device, to_device
from mncore_hdl.layout.mapping import is_dense, write_image

from . import planned
from .base import DramDevice, DramSnapshot, LoadedProgram
from .commands import Buffer, HostWrite
from .dram import PAGE_LW, DramStore, GroupDram
from .host_values import LayoutNumbers, handed_out, layout_key, lazy_clone, torch_type, whole_memory

__all__ = ["FunctionalDevice", "LayoutNumbers", "PAGE_LW", "layout_key"]

#: Bytes from which a Launch output's buffer forgets a freed buffer's write-back value before
#: the program runs (:meth:`FunctionalDevice._before_run`): from about where malloc hands out
#: memory by the page (glibc: 128 KiB and up) rather than from its bins.
RECYCLE_BYTES = 256 << 10


class FunctionalDevice(DramDevice):
    """MN-Core 2 as numpy arrays: exact data, modeled cycles.

    Cycles come from :mod:`mncore_hdl.memctrl.timing` (memory streams) and
    :mod:`mncore_hdl.converter.timing` (conversions), the analytic models checked against the
    RTL; the Groups' controllers work in parallel, so a buffer spread over Groups costs the
    cycles of one Group's share.
    """

    cycles_kind = "modeled"
    replays = True

    def __init__(self, config: ArchConfig, name: str):
        super().__init__(config, name)
        self.dram = DramStore(config.groups, config.dram_lw_per_group)
        self.drams = [GroupDram(config.dram_lw_per_group, self.dram, g)
                      for g in range(config.groups)]
        self._stream_memo: dict[tuple[int, bool], int] = {}
        # Launch inputs whose layout decodes as a view of DRAM (row-major): by (buffer id,
        # layout), the buffer and the view. Cache keys use the buffer's id (never reused).
        self._views: dict[tuple[int, Any], tuple[Buffer, Any]] = {}
        # Buffers given back by finalizers since the decoded tensors were last pruned.
        self._released: list[Buffer] = []
        # Per loaded program: the program, and its reads' and outputs' layout facts (_plan).
        self._plans: dict[str, tuple[LoadedProgram, tuple, tuple, tuple]] = {}
        #: Launch outputs of at least this many bytes forget a freed buffer's write-back value
        #: over their buffer before the program runs (:meth:`_before_run`); read when a
        #: program is first launched.
        self.recycle_bytes = RECYCLE_BYTES

    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        # A view of DRAM, no copy: the host copies what it keeps (from_device), and a Launch
        # only reads its inputs (their tensors may be views of DRAM).
        view = self.dram.view if path == "compute" else self.dram.read
        image = view(buf.group, buf.groups, buf.address, buf.lw_per_group)
        return image, self._stream_cycles(buf.lw_per_group, write=False)

    def _load_reads(self, program: LoadedProgram, bindings: Mapping[str, Buffer]
                    ) -> tuple[dict[str, Any], int, int]:
        # The default loop, with the two common cases taken at once: a kept decoded tensor
        # (a parameter, a constant, a state the last step stored) and a view of DRAM (a
        # row-major buffer, laid out first if a write-back value overlaps it); anything else
        # through _load_input. Same values, cycles and bytes; a read the program never uses
        # (LoadedProgram.unread: a label an inference takes) costs its cycles and bytes, and
        # is not decoded.
        # The loop inlines the lookups it makes per read (Allocator.is_live,
        # DecodedCache.get), each one call fewer: a small model's Launch reads dozens.
        if self._released:  # buffers given back by finalizers: forget what they held first
            self._forget_released()
        values: dict[str, Any] = {}
        cycles = nbytes = 0
        allocator, entries, memo = self.allocator, self.dram.decoded.entries, self._stream_memo
        live, released, lives = allocator.is_live, allocator.pending, allocator.by_id
        for name, layout, number, unread in self._plan(program)[0]:
            buf = bindings[name]
            if (released or lives.get(buf.id) is not buf) and not live(buf):
                self._check_buffer(buf)  # raises
            memoised = memo.get((buf.lw_per_group, False))
            cycles += (memoised if memoised is not None
                       else self._stream_cycles(buf.lw_per_group, write=False))
            nbytes += buf.nbytes
            if unread:
                continue
            key = (buf.id, number)
            entry = entries.get(key)
            if entry is not None and entry.value._version == entry.version:
                values[name] = entry.value  # what get() returns, without the call
                entries.move_to_end(key)
            else:
                values[name] = self._load_missed(buf, layout, key, entry is not None)
        return values, cycles, nbytes

    def _load_missed(self, buf: Buffer, layout: Layout, key: tuple[int, int], held: bool
                     ) -> Any:
        """A Launch read of ``buf`` in ``layout`` (cache key ``key``) that is not a kept
        decoded tensor at hand: the entry's tensor when ``held`` and still current, a kept
        view of DRAM (write-back values over it laid out first), else :meth:`_load_input`."""
        decoded = self.dram.decoded
        value = decoded.get(key) if held else None
        if value is not None:
            return value
        kept = self._views.get(key)
        if kept is None:
            return self._load_input(buf, layout)[0]
        if decoded.may_be_dirty(buf.group, buf.groups, buf.address, buf.lw_per_group):
            self.dram.flush(buf.group, buf.groups, buf.address, buf.lw_per_group)
        return kept[1]

    def _plan(self, program: LoadedProgram) -> tuple[tuple, tuple, tuple]:
        """``program``'s reads as (name, layout, layout number, unread), its outputs as
        (name, layout, layout number, torch shape and dtype), and the outputs whose buffers'
        old write-back values it may forget before it runs (:meth:`_before_run`), worked out
        once per loaded program."""
        kept = self._plans.get(program.name)
        if kept is None or kept[0] is not program:
            reads = tuple((n, program.layouts[n], layout_key(program.layouts[n]),
                           n in program.unread) for n in program.reads)
            layouts = program.output_layouts
            stores = tuple((n, layouts[n], layout_key(layouts[n]),
                            layouts[n].memo("torch_type", torch_type))
                           for n in program.outputs)
            # Not when an output is range-checked (int64): the run may then refuse to store.
            large = () if any(layouts[n].element.narrowed for n in program.outputs) else tuple(
                n for n in program.outputs if layouts[n].nbytes >= self.recycle_bytes)
            kept = self._plans[program.name] = (program, reads, stores, large)
        return kept[1], kept[2], kept[3]

    def _before_run(self, program: LoadedProgram, bindings: Mapping[str, Buffer],
                    stores: Mapping[str, Buffer]) -> None:
        # A large output's buffer often takes the range of one freed since (the last call's
        # output, whose proxy was dropped), which may still hold that output's write-back
        # value: kept until this Launch's store covers it, it would be alive while the
        # program computes its successor, two large tensors at once, and the allocator could
        # not hand the successor the memory it frees (on glibc: fresh pages on every call).
        # Forgotten here instead, unlaid: every store of the Launch covers its whole buffer,
        # nothing reads the range in between (it is no read's buffer), and no live buffer
        # owned the value. What this gives up: a Launch that raises from here on (an
        # interrupt) leaves that freed memory with older bytes than an eager model would.
        large = self._plan(program)[2]
        decoded = self.dram.decoded
        if not large or not decoded.dirty:
            return
        live = self.allocator.is_live
        found = [(stores[name], kept) for name in large
                 if (kept := decoded.dirty_within(stores[name].group, stores[name].groups,
                                                  stores[name].address,
                                                  stores[name].lw_per_group))]
        if not found or not all(live(buf) for buf in stores.values()):
            return  # nothing to forget, or a store will refuse: nothing is forgotten
        read = bindings.values()
        for buf, kept in found:
            if buf not in read:
                for key, owner in kept:
                    if isinstance(owner, Buffer) and not live(owner):
                        decoded.discard(key)

    def _load_input(self, buf: Buffer, layout: Layout) -> tuple[Any, int]:
        # Decoding from a compute-native layout copies the whole buffer: the tensor is kept
        # (self.dram.decoded) until a write overlaps the buffer, so a registered parameter or
        # a constant is decoded once, not once per Launch. The cycles are the read's either way.
        cycles = self._stream_cycles(buf.lw_per_group, write=False)
        decoded = self.dram.decoded
        key = (buf.id, layout_key(layout))
        value = decoded.get(key)
        if value is not None:
            return value, cycles
        view = self._views.get(key, (None, None))[1]
        if view is not None:
            # A view of DRAM sees every write; write-back values over it are laid out first.
            self.dram.flush(buf.group, buf.groups, buf.address, buf.lw_per_group)
            return view, cycles
        image = self.dram.view(buf.group, buf.groups, buf.address, buf.lw_per_group)
        value = from_device(image, layout, copy=False)
        if self.dram.holds(value):  # a view of DRAM: kept as it is, never stale
            if len(self._views) >= 4096:
                for old in self._views:
                    self.dram.unwatch(old)
                self._views.clear()
            self._views[key] = (buf, value)
            # Writes to the buffer change the view's bytes: they bump its version counter
            # (what the interpreter's kept constant-only values are checked against).
            self.dram.watch(key, (buf.group, buf.groups, buf.address, buf.lw_per_group), value)
        else:
            if self._released:  # forget what buffers given back since held, before keeping more
                self._forget_released()
            span = (buf.group, buf.groups, buf.address, buf.lw_per_group)
            decoded.put(key, value, span, owner=buf)
        return value, cycles

    @property
    def pending_releases(self) -> int:
        """Buffers given back by finalizers whose kept values are not yet forgotten (at the
        next Launch or decode)."""
        return len(self._released)

    @property
    def kept_views(self) -> int:
        """How many Launch inputs are kept as views of DRAM (decoded once, never copied);
        a freed buffer's are forgotten."""
        return len(self._views)

    def keeps_view(self, buf: Buffer) -> bool:
        """Whether a Launch input read from ``buf`` is kept as a view of DRAM (in any
        layout)."""
        return any(key[0] == buf.id for key in self._views)

    def _forget_released(self) -> None:
        """:meth:`_forget_dead` of the buffers given back by finalizers since the last time:
        their entries and views only, no test of every entry."""
        released, self._released = self._released, []
        live = self.allocator.is_live
        dead = [buf for buf in released if not live(buf)]
        for buf in dead:
            self.dram.decoded.drop_owner(buf)
        ids = {buf.id for buf in dead}
        for key in [k for k in self._views if k[0] in ids]:
            del self._views[key]
            self.dram.unwatch(key)

    def _forget_dead(self) -> None:
        self.dram.decoded.drop_owners(self.allocator.is_live)
        live = self.allocator.is_live
        for key in [k for k, v in self._views.items() if not live(v[0])]:
            del self._views[key]
            self.dram.unwatch(key)

    def free(self, buf: Buffer) -> None:
        with self.lock:
            super().free(buf)
            self._forget_dead()

    def release(self, buf: Buffer) -> None:
        super().release(buf)
        # From a finalizer, which never waits: the next decode forgets what it held (a list
        # append is atomic under the GIL; _forget_released swaps the list out first).
        self._released.append(buf)

    def unload_program(self, name: str, buffers: tuple[Buffer, ...] = ()) -> None:
        with self.lock:
            super().unload_program(name, buffers)
            self._plans.pop(name, None)
            self._forget_dead()

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        self.dram.write(buf.group, buf.address, image)
        return self._stream_cycles(buf.lw_per_group, write=True)

    def _host_write(self, command: HostWrite) -> int:
        # A host tensor whose own bytes are the image is kept write-back, as a lazy clone
        # (_keep_host); anything else is copied into DRAM. The cycles are the write's either way.
        buf, source = command.buffer, command.source
        if source is not None and self._keep_host(buf, source, command.layout):
            return self._stream_cycles(buf.lw_per_group, write=True)
        return self._dram_write("host", buf, command.data)

    def _write_host_tensor(self, buf: Buffer, tensor: Any, layout: Layout) -> int:
        """A replayed HostWrite (:class:`~.replay.CallReplay`) of host ``tensor``, of
        ``layout``'s shape and dtype with values its lanes hold (checked by the caller), into
        live ``buf``: kept write-back as :meth:`_host_write` keeps a tensor that is its own
        image, narrowed lanes included (the values fit, so laying the tensor out later gives
        the bytes laying it out now would); laid out into DRAM at once otherwise."""
        if self._keep_host(buf, tensor, layout, checked=True):
            return self._stream_cycles(buf.lw_per_group, write=True)
        return self._dram_write("host", buf, to_device(tensor, layout))

    def _write_facts(self, buf: Buffer, layout: Layout) -> tuple:
        """What :meth:`_write_planned` into ``buf`` in ``layout`` works out once
        (:func:`.planned.write_facts`)."""
        return planned.write_facts(self, buf, layout)

    def _write_planned(self, facts: tuple, tensor: Any) -> int:
        """:meth:`_write_host_tensor` of a replayed HostWrite, its fixed facts worked out by
        :meth:`_write_facts` (:func:`.planned.write_planned`)."""
        return planned.write_planned(self, facts, tensor)

    def _run_planned(self, program: LoadedProgram, bindings: Mapping[str, Buffer],
                     stores: Mapping[str, Buffer], memo: dict[str, Any]) -> tuple[int, int]:
        """:meth:`_run_program` of a replayed Launch, its fixed facts kept in ``memo``
        (:func:`.planned.run_planned`)."""
        return planned.run_planned(self, program, bindings, stores, memo)

    def _keep_host(self, buf: Buffer, source: Any, layout: Layout, checked: bool = False
                   ) -> bool:
        """Make ``buf`` hold host tensor ``source`` laid out in ``layout``, write-back (as a
        Launch output is: :mod:`.dram`): kept as a lazy clone of it, laid out into DRAM only
        when something looks at the range. The clone shares the caller's memory until either
        side writes to it, which then gets a private copy (torch's copy-on-write storage), so
        the caller may change its tensor after the call and the buffer keeps the bytes it was
        given. Says whether it did; only a tensor that is all of its memory qualifies (a view
        of a larger tensor would keep the whole of it alive), of the layout's type, spanning
        the buffer; of a narrowed type (int64 in 32-bit lanes) only when ``checked`` says its
        values fit their lanes."""
        shape, dtype = layout.memo("torch_type", torch_type)
        if (source.dtype != dtype or source.shape != shape
                or (layout.element.narrowed and not checked)
                or layout.groups != buf.groups or layout.lw_per_group != buf.lw_per_group
                or not self._keepable(source)):
            return False
        clone = lazy_clone(source.detach() if source.requires_grad else source)
        return clone is not None and self.dram.store_deferred(
            (buf.id, layout_key(layout)), buf.group, buf.groups, buf.address, buf.lw_per_group,
            clone, layout, owner=buf)

    def _keepable(self, source: Any) -> bool:
        """Whether host tensor ``source`` may be kept write-back as a lazy clone (what
        :meth:`_keep_host` asks of the tensor itself): on the CPU, all of its memory, not a
        view of DRAM, within the decoded cache's limit."""
        return (source.is_cpu and whole_memory(source) and not self.dram.holds(source)
                and source.element_size() * source.nelement() <= self.dram.decoded.limit_bytes)

    def _storable(self, tensor: Any, ttype: tuple[tuple[int, ...], Any]) -> bool:
        """Whether a Launch output ``tensor`` may stand for its buffer's bytes, write-back
        (what :meth:`_store` asks before ``store_deferred``, which also asks the cache's
        limit): of the layout's torch type ``ttype``, on the CPU, nothing else can change it
        (not a view of DRAM, not an inference tensor)."""
        return (tensor.dtype == ttype[1] and tensor.shape == ttype[0] and tensor.is_cpu
                and not self.dram.holds(tensor) and not tensor.is_inference())

    def _own_outputs(self, outputs: dict[str, Any]) -> dict[str, Any]:
        # Only an output that is a view of DRAM (of an input decoded as a view) can be changed
        # by the stores of this Launch: copied. Every other output is the program's own
        # tensor or a view of a kept decoded tensor, which no DRAM write changes.
        holds = self.dram.holds
        for name, tensor in outputs.items():
            if holds(tensor):
                outputs[name] = tensor.clone()
        return outputs

    def _store_outputs(self, program: LoadedProgram, stores: Mapping[str, Buffer],
                       outputs: Mapping[str, Any]) -> tuple[int, int]:
        # The default loop with each output's layout facts worked out once (_plan).
        cycles = nbytes = 0
        live, memo = self.allocator.is_live, self._stream_memo
        for name, layout, number, ttype in self._plan(program)[1]:
            buf = stores[name]
            if not live(buf):
                self._check_buffer(buf)  # raises
            self._store(buf, outputs[name], layout, number, ttype)
            memoised = memo.get((buf.lw_per_group, True))
            cycles += (memoised if memoised is not None
                       else self._stream_cycles(buf.lw_per_group, write=True))
            nbytes += buf.nbytes
        return cycles, nbytes

    def _dram_store(self, path: str, buf: Buffer, tensor, layout) -> int:
        self._store(buf, tensor, layout, layout_key(layout), layout.memo("torch_type", torch_type))
        return self._stream_cycles(buf.lw_per_group, write=True)

    def _store(self, buf: Buffer, tensor: Any, layout: Layout, number: int,
               ttype: tuple[tuple[int, ...], Any]) -> None:
        dram = self.dram
        # Write-back: the tensor stands for the buffer's bytes until something looks at them
        # (dram.py); a reader in this layout gets it without a decode, and an output freed
        # before anyone looks is never laid out. Only a tensor nothing else can change
        # qualifies: not a view of DRAM, and of the layout's exact shape and dtype.
        if (self._storable(tensor, ttype)
                and dram.store_deferred((buf.id, number), buf.group, buf.groups, buf.address,
                                        buf.lw_per_group,
                                        tensor.detach() if tensor.requires_grad else tensor,
                                        layout, owner=buf)):
            return
        # Lays the tensor out straight into DRAM: no image in between.
        dst = dram.writable(buf.group, buf.groups, buf.address, buf.lw_per_group, covers=True)
        if not is_dense(layout):
            dst[...] = 0
        write_image(dst, tensor, layout)

    def _read_tensor(self, buf: Buffer, layout: Layout) -> tuple[Any, int]:
        # A tensor kept for the buffer in this layout (a Launch output, a decoded input) is
        # what decoding the DRAM would give: the host gets a copy of it, no decode.
        cycles = self._stream_cycles(buf.lw_per_group, write=False)
        value = self.dram.decoded.get((buf.id, layout_key(layout)))
        if value is not None:
            return handed_out(value), cycles
        image = self.dram.read(buf.group, buf.groups, buf.address, buf.lw_per_group)
        return from_device(image, layout), cycles

    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        from mncore_hdl.converter.timing import conversion_cycles

        cycles = conversion_cycles(self.config, descriptor, src_group=src.group,
                                   dst_group=dst.group)
        descriptor.execute_into(
            self.dram.read(src.group, src.groups, src.address, src.lw_per_group),
            self.dram.writable(dst.group, dst.groups, dst.address, dst.lw_per_group))
        return cycles

    def _stream_cycles(self, lw: int, *, write: bool) -> int:
        # A pure function of (config, lw, write): remembered per device, as calls repeat sizes.
        key = (lw, write)
        cycles = self._stream_memo.get(key)
        if cycles is None:
            from mncore_hdl.memctrl.timing import stream_cycles

            cycles = stream_cycles(self.config, lw, write=write)
            if len(self._stream_memo) < 4096:
                self._stream_memo[key] = cycles
        return cycles

    def peek(self, buf: Buffer) -> np.ndarray:
        return self.dram.view(buf.group, buf.groups, buf.address, buf.lw_per_group).copy()

    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        self.dram.write(buf.group, buf.address, image)

    def dram_snapshot(self) -> DramSnapshot:
        """Every Group's non-zero pages (to compare with another backend's DRAM)."""
        return [d.snapshot() for d in self.drams]
