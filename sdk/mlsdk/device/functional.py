"""The functional model: numpy DRAM per Group and analytic timing from the architecture config."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor, Layout, from_device
from mncore_hdl.layout.mapping import is_dense, write_image

from .base import DramDevice, DramSnapshot, LoadedProgram
from .commands import Buffer
from .dram import PAGE_LW, DramStore, GroupDram

__all__ = ["FunctionalDevice", "LayoutNumbers", "PAGE_LW", "layout_key"]


class FunctionalDevice(DramDevice):
    """MN-Core 2 as numpy arrays: exact data, modeled cycles.

    Cycles come from :mod:`mncore_hdl.memctrl.timing` (memory streams) and
    :mod:`mncore_hdl.converter.timing` (conversions), the analytic models checked against the
    RTL; the Groups' controllers work in parallel, so a buffer spread over Groups costs the
    cycles of one Group's share.
    """

    cycles_kind = "modeled"

    def __init__(self, config: ArchConfig, name: str):
        super().__init__(config, name)
        self.dram = DramStore(config.groups, config.dram_lw_per_group)
        self.drams = [GroupDram(config.dram_lw_per_group, self.dram, g)
                      for g in range(config.groups)]
        self._stream_memo: dict[tuple[int, bool], int] = {}
        # Launch inputs whose layout decodes as a view of DRAM (row-major): by (buffer id,
        # layout), the buffer and the view. Cache keys use the buffer's id (never reused).
        self._views: dict[tuple[int, Any], tuple[Buffer, Any]] = {}
        # A buffer was given back by a finalizer since the decoded tensors were last pruned.
        self._released = False
        # Per loaded program: the program, and its reads' and outputs' layout facts (_plan).
        self._plans: dict[str, tuple[LoadedProgram, tuple, tuple]] = {}

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
        # through _load_input. Same values, cycles and bytes.
        values: dict[str, Any] = {}
        cycles = nbytes = 0
        live, decoded, views = self.allocator.is_live, self.dram.decoded, self._views
        get, memo = decoded.get, self._stream_memo
        for name, layout, number in self._plan(program)[0]:
            buf = bindings[name]
            if not live(buf):
                self._check_buffer(buf)  # raises
            key = (buf.id, number)
            value = get(key)
            if value is None:
                kept = views.get(key)
                if kept is None:
                    value, taken = self._load_input(buf, layout)
                    values[name] = value
                    cycles += taken
                    nbytes += buf.nbytes
                    continue
                value = kept[1]
                if decoded.dirty:
                    self.dram.flush(buf.group, buf.groups, buf.address, buf.lw_per_group)
            memoised = memo.get((buf.lw_per_group, False))
            values[name] = value
            cycles += (memoised if memoised is not None
                       else self._stream_cycles(buf.lw_per_group, write=False))
            nbytes += buf.nbytes
        return values, cycles, nbytes

    def _plan(self, program: LoadedProgram) -> tuple[tuple, tuple]:
        """``program``'s reads as (name, layout, layout number) and its outputs as (name,
        layout, layout number, torch shape and dtype), worked out once per loaded program."""
        kept = self._plans.get(program.name)
        if kept is None or kept[0] is not program:
            reads = tuple((n, program.layouts[n], layout_key(program.layouts[n]))
                          for n in program.reads)
            layouts = program.output_layouts
            stores = tuple((n, layouts[n], layout_key(layouts[n]),
                            layouts[n].memo("torch_type", _torch_type))
                           for n in program.outputs)
            kept = self._plans[program.name] = (program, reads, stores)
        return kept[1], kept[2]

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
                self._released = False
                self._forget_dead()
            span = (buf.group, buf.groups, buf.address, buf.lw_per_group)
            decoded.put(key, value, span, owner=buf)
        return value, cycles

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
        # From a finalizer, which never waits: the next decode forgets what it held.
        self._released = True

    def unload_program(self, name: str, buffers: tuple[Buffer, ...] = ()) -> None:
        with self.lock:
            super().unload_program(name, buffers)
            self._plans.pop(name, None)
            self._forget_dead()

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        self.dram.write(buf.group, buf.address, image)
        return self._stream_cycles(buf.lw_per_group, write=True)

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
        for name, layout, number, torch_type in self._plan(program)[1]:
            buf = stores[name]
            if not live(buf):
                self._check_buffer(buf)  # raises
            self._store(buf, outputs[name], layout, number, torch_type)
            memoised = memo.get((buf.lw_per_group, True))
            cycles += (memoised if memoised is not None
                       else self._stream_cycles(buf.lw_per_group, write=True))
            nbytes += buf.nbytes
        return cycles, nbytes

    def _dram_store(self, path: str, buf: Buffer, tensor, layout) -> int:
        self._store(buf, tensor, layout, layout_key(layout), layout.memo("torch_type", _torch_type))
        return self._stream_cycles(buf.lw_per_group, write=True)

    def _store(self, buf: Buffer, tensor: Any, layout: Layout, number: int,
               torch_type: tuple[tuple[int, ...], Any]) -> None:
        dram = self.dram
        # Write-back: the tensor stands for the buffer's bytes until something looks at them
        # (dram.py); a reader in this layout gets it without a decode, and an output freed
        # before anyone looks is never laid out. Only a tensor nothing else can change
        # qualifies: not a view of DRAM, and of the layout's exact shape and dtype.
        shape, dtype = torch_type
        if (tensor.dtype == dtype and tensor.shape == shape and tensor.is_cpu
                and not dram.holds(tensor) and not tensor.is_inference()
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
            # contiguous, as a decode would give; a copy either way
            dense = value.contiguous()
            return (dense if dense is not value else value.clone()), cycles
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


def _torch_type(layout: Layout) -> tuple[tuple[int, ...], Any]:
    """The shape and torch dtype of the tensors ``layout`` holds (None: no torch dtype by that
    name, so no tensor matches)."""
    dtype = getattr(torch, layout.dtype, None)
    return tuple(layout.shape), dtype if isinstance(dtype, torch.dtype) else None


class LayoutNumbers:
    """Layouts as cache keys: a small int per layout, equal for equal layouts, kept on the
    (frozen) layout itself. A Layout hashes its nested sub-axes on every lookup, and a key
    object with a Python ``__hash__`` costs a call per lookup; an int costs neither.

    Parameters
    ----------
    limit : int
        How many layouts the table holds before it starts again. Numbers are never reused, so a
        layout numbered again after that gets a fresh number: a cache miss at worst, never
        another layout's entry.
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"The limit must be a positive int, not {limit!r}")
        self.limit = limit
        self._numbers: dict[Layout, int] = {}
        self._next = itertools.count()
        # Marks a number this table gave: a layout copied or unpickled carries a copy of the
        # mark (a plain object, so copying a layout never copies the table), not the mark.
        self._mark = object()

    def __len__(self) -> int:
        return len(self._numbers)

    def key(self, layout: Layout) -> int:
        """The number of ``layout``. A number kept on a layout by another table, or by another
        process (a layout copied or unpickled), is not trusted: it is looked up again."""
        kept = layout.memo("layout_number", _number_cell)
        if kept[0] is not None and kept[0][1] is self._mark:
            return kept[0][0]
        if len(self._numbers) >= self.limit:
            self._numbers.clear()  # bounded for long sessions
        number = self._numbers.setdefault(layout, next(self._next))
        kept[0] = (number, self._mark)
        return number


def _number_cell(_: Layout) -> list[tuple[int, object] | None]:
    """The cell a layout keeps its number in: ``[(number, mark)]`` once a table gave one."""
    return [None]


#: The table every device of this process keys its decoded values by.
LAYOUT_NUMBERS = LayoutNumbers()
layout_key = LAYOUT_NUMBERS.key
