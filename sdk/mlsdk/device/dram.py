"""The functional model's DRAM: every Group's LWs in one lazily backed array, read and written
as slices.

All Groups live in one ``(groups, lw_per_group)`` uint64 array over an anonymous memory
mapping that the OS backs page by page on first write, so 4 GiB modeled per Group costs nothing
until written, and a buffer's image over consecutive Groups is a plain view (no stacking). The
pages written are recorded, so a snapshot lists them without scanning the whole DRAM.

A Launch output, or a host input in its own row-major bytes, may be kept write-back
(:meth:`DramStore.store_deferred`): the tensor the program computed (or a copy-on-write clone
of the caller's) stands for its range until something looks at the range's bytes (a view, a
read, a snapshot, a write that does not cover it), which lays it out first, so every observer
sees the bytes an eager store would have written. A write covering the whole range, the next
output stored into a reused buffer say, makes laying it out unnecessary.
"""

from __future__ import annotations

import mmap
import sys
from typing import Any

import numpy as np
from mncore_hdl.layout.mapping import from_device, is_dense, write_image
from mncore_hdl.layout.strided import strided_plan

from .base import PAGE_LW
from .decoded import DecodedCache
from .spans import SpanIndex

__all__ = ["DramStore", "GroupDram", "PAGE_LW"]


#: Linux's MAP_NORESERVE: no swap is reserved for the mapping (it may exceed free memory).
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)


def _lazy_zeros(groups: int, lw_per_group: int) -> tuple[np.ndarray, object]:
    """A zero ``(groups, lw_per_group)`` uint64 array whose pages cost memory once written."""
    nbytes = groups * lw_per_group * 8
    if nbytes and hasattr(mmap, "MAP_ANONYMOUS"):
        try:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
            backing = mmap.mmap(-1, nbytes, flags=flags)
        except (OSError, ValueError):
            backing = None
        if backing is not None:
            if hasattr(mmap, "MADV_HUGEPAGE"):
                # Large pages where the OS backs them on request (as numpy asks for its own
                # large arrays): strided copies over a buffer miss the TLB far less (16 MiB
                # tiles -> rows: 2.4 ms with 4 KiB pages, 1.7 ms with 2 MiB ones). Memory is
                # still taken only where written, in pieces of up to 2 MiB.
                try:
                    backing.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
            words = np.frombuffer(backing, dtype=np.uint64).reshape(groups, lw_per_group)
            return words, backing
    # np.zeros of a large size is calloc: also backed lazily by the OS.
    return np.zeros((groups, lw_per_group), dtype=np.uint64), None


class DramStore:
    """The DRAM of ``groups`` Groups of ``lw_per_group`` LWs each; unwritten LWs read as zero.

    Parameters
    ----------
    groups : int
        Groups modeled.
    lw_per_group : int
        LWs of DRAM per Group.
    """

    def __init__(self, groups: int, lw_per_group: int):
        for name, value in (("groups", groups), ("lw_per_group", lw_per_group)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"DRAM {name} must be a positive integer, not {value!r}")
        self.groups = groups
        self.lw_per_group = lw_per_group
        self.words, self._backing = _lazy_zeros(groups, lw_per_group)
        # The array never moves: its bounds, for holds().
        self._start = self.words.ctypes.data
        self._end = self._start + self.words.nbytes
        #: Per Group, the PAGE_LW pages ever written (a superset of the non-zero ones).
        self.touched: list[set[int]] = [set() for _ in range(groups)]
        self._touched_spans: set[tuple[int, int, int, int]] = set()  # of pages (see _touch)
        #: Tensors decoded from ranges of this DRAM; every write drops the ones it overlaps.
        self.decoded = DecodedCache(flush=self._flush)
        # Tensors that are views of this DRAM, by key: every write bumps the version counter
        # of those it overlaps (see watch()).
        self._watched = SpanIndex()
        self._views: dict[Any, Any] = {}

    @property
    def decoded(self) -> DecodedCache:
        return self._decoded

    @decoded.setter
    def decoded(self, cache: DecodedCache) -> None:
        # A cache set from outside (tests) lays out write-back values into this store too.
        old = getattr(self, "_decoded", None)
        if old is not None:
            old.clear()
        if cache.flush is None:
            cache.flush = self._flush
        self._decoded = cache

    def view(self, group: int, groups: int, address: int, count: int) -> np.ndarray:
        """The ``(groups, count)`` LWs from ``address`` in Groups ``group ..``, as a view
        (write-back values over the range laid out first)."""
        self._check(group, groups, address, count)
        self._decoded.flush_range(group, groups, address, count)
        return self.words[group:group + groups, address:address + count]

    def flush(self, group: int, groups: int, address: int, count: int) -> None:
        """Lay out the write-back values over the range (what :meth:`view` does first)."""
        self._check(group, groups, address, count)
        self._decoded.flush_range(group, groups, address, count)

    def read(self, group: int, groups: int, address: int, count: int) -> np.ndarray:
        """A read-only view of :meth:`view` (what a read returns: no copy is made)."""
        out = self.view(group, groups, address, count)
        out.flags.writeable = False
        return out

    def writable(self, group: int, groups: int, address: int, count: int, *,
                 covers: bool = False) -> np.ndarray:
        """:meth:`view`, with its pages recorded as written (the caller writes into it) and
        the tensors decoded from them forgotten: every write goes through here.

        ``covers``: the caller overwrites every LW of the range, so write-back values inside
        it need not be laid out first (those only partly inside still are)."""
        self._check(group, groups, address, count)
        self._decoded.invalidate(group, groups, address, count, covers=covers)
        self._touch(group, groups, address, count)
        if self._views:
            self._bump(group, groups, address, count)
        return self.words[group:group + groups, address:address + count]

    def watch(self, key: Any, span: tuple[int, int, int, int], tensor: Any) -> None:
        """Bump ``tensor``'s version counter (``torch.autograd.graph.increment_version``)
        whenever the range ``span`` is written from now on: ``tensor`` is a view of it, whose
        bytes change under it, and the counter is how a reader that keeps what it computed
        from a tensor (the interpreter's constant-only values) tells that it changed."""
        self._watched.add(key, span)
        self._views[key] = tensor

    def unwatch(self, key: Any) -> None:
        """Stop :meth:`watch` ing ``key`` (nothing if it is not watched)."""
        if self._views.pop(key, None) is not None:
            self._watched.remove(key)

    def _bump(self, group: int, groups: int, address: int, count: int) -> None:
        found = self._watched.overlapping(group, groups, address, count)
        if found:  # most writes overlap no view: nothing to import or bump
            from torch.autograd.graph import increment_version

            for key in found:
                increment_version(self._views[key])

    def store_deferred(self, key: Any, group: int, groups: int, address: int, count: int,
                       tensor: Any, layout: Any, owner: Any = None) -> bool:
        """Make the range hold ``tensor`` laid out in ``layout`` (which spans the whole range),
        write-back: kept as the tensor until observed. Returns False, storing nothing, when the
        tensor is too large to keep (the caller stores it at once)."""
        self._check(group, groups, address, count)
        span = (group, groups, address, count)
        if tensor.element_size() * tensor.nelement() > self._decoded.limit_bytes:
            return False
        if not self._decoded.put_dirty(key, tensor, span, owner, layout):
            return False
        self._touch(group, groups, address, count)
        return True

    def _flush(self, entry: Any) -> None:
        group, groups, address, count = entry.span
        dst = self.words[group:group + groups, address:address + count]
        layout = entry.layout
        # The range is the tensor's own bytes (an identity layout): a torch copy into a view of
        # it, which reads the value through its read-only pointer, so a copy-on-write value (a
        # host input's lazy clone, say) is not given private memory first, as a numpy view of
        # it would be.
        view = (from_device(dst, layout, copy=False)
                if strided_plan(layout).identity and not layout.element.narrowed else None)
        if view is not None and self.holds(view):
            view.copy_(entry.value)
        else:
            if not is_dense(layout):
                dst[...] = 0
            write_image(dst, entry.value, layout)
        if self._views:
            self._bump(group, groups, address, count)

    def _touch(self, group: int, groups: int, address: int, count: int) -> None:
        if count <= 0:
            return
        first, last = address // PAGE_LW, (address + count - 1) // PAGE_LW
        touched = self.touched
        if first == last:  # most writes: one page
            for g in range(group, group + groups):
                touched[g].add(first)
            return
        # Pages stay touched, and calls write the same buffers again: a range of pages listed
        # once is not listed again (a 16 MiB buffer is 512 pages).
        span = (group, groups, first, last)
        if span in self._touched_spans:
            return
        if len(self._touched_spans) >= 4096:
            self._touched_spans.clear()
        self._touched_spans.add(span)
        for g in range(group, group + groups):
            touched[g].update(range(first, last + 1))

    def write(self, group: int, address: int, image: np.ndarray) -> None:
        """Store ``image`` (``(groups, count)`` uint64) from ``address`` in Groups ``group ..``."""
        image = np.asarray(image)
        if image.ndim == 1:
            image = image[None, :]
        groups, count = image.shape
        self.writable(group, groups, address, count, covers=True)[...] = image

    def holds(self, tensor: Any) -> bool:
        """Whether ``tensor``'s data lies in this DRAM (it is a view of it, not a copy)."""
        # The read-only pointer: asking for a writable one would give a copy-on-write tensor
        # (a lazy clone of a caller's) private memory, a copy.
        return self._start <= tensor.const_data_ptr() < self._end

    def snapshot(self, group: int) -> dict[int, np.ndarray]:
        """A copy of every non-zero page of one Group (to compare two memories)."""
        row = self.view(group, 1, 0, self.lw_per_group)[0]
        pages = {}
        for page in sorted(self.touched[group]):
            data = row[page * PAGE_LW:(page + 1) * PAGE_LW]
            if data.any():
                pages[page] = data.copy()
        return pages

    def _check(self, group: int, groups: int, address: int, count: int) -> None:
        if group < 0 or groups < 0 or group + groups > self.groups:
            raise IndexError(f"DRAM access to Groups {group}..{group + groups - 1} is outside "
                             f"the {self.groups} Groups")
        end = address + count
        if address < 0 or count < 0 or end > self.lw_per_group:
            raise IndexError(
                f"DRAM access 0x{address:x}..0x{end:x} is outside the Group's "
                f"0x{self.lw_per_group:x} LWs"
            )


class GroupDram:
    """One Group's DRAM (a row of a :class:`DramStore`): read, write and snapshot by LW address.

    Parameters
    ----------
    lw_size : int
        LWs in the Group.
    store, group : DramStore, int, optional
        The store and row it lives in; by default a store of its own.
    """

    def __init__(self, lw_size: int, store: DramStore | None = None, group: int = 0):
        self.store = store if store is not None else DramStore(1, lw_size)
        self.group = group
        self.lw_size = lw_size

    def read(self, address: int, count: int) -> np.ndarray:
        """A copy of ``count`` LWs from ``address``."""
        return self.store.view(self.group, 1, address, count)[0].copy()

    def write(self, address: int, words: np.ndarray) -> None:
        self.store.write(self.group, address, np.asarray(words).reshape(1, -1))

    def snapshot(self) -> dict[int, np.ndarray]:
        """A copy of every non-zero page, for comparing two memories."""
        return self.store.snapshot(self.group)
