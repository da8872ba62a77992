"""Tensors decoded from DRAM, kept while their DRAM range is unchanged (the functional model's
Launch reads a registered parameter or a program constant once, not once per call).

Decoding a buffer from a compute-native layout (:func:`mncore_hdl.layout.from_device`) costs a
strided copy of the whole buffer, as much as uploading it again from the host. A
:class:`DecodedCache` remembers the tensor decoded from a buffer in a layout until a write
overlaps the buffer's LW range: the DRAM store it belongs to calls :meth:`DecodedCache.invalidate`
on every write (host writes, Launch outputs, conversion destinations, pokes), so a hit returns
exactly what decoding the DRAM again would. It holds at most ``limit_bytes`` of tensors (least
recently used first out), and the device drops a buffer's entries when the buffer is freed.

An entry may also be *dirty* (write-back): a Launch output kept as the tensor the program
computed, or a host input kept as a copy-on-write clone of the caller's tensor, its DRAM bytes
not yet laid out. The cache then owes the DRAM those bytes: before
anything observes or partly overwrites the range, the store's ``flush`` callback lays the
tensor out (exactly what an eager store would have written), and a dirty entry is never
forgotten without it, except when a write covers its whole range (which an eager model would
have overwritten anyway, or a Launch about to: :meth:`discard`). Freeing the buffer keeps a
dirty entry: freed DRAM keeps its bytes.

Every DRAM write and observation asks which entries overlap a range, so the entries are
indexed by address (:class:`~.spans.SpanIndex`), the dirty ones a second time on their own: a
write costs the few entries near it, and an observation (a Launch reading a buffer as a view of
DRAM, say) only the dirty ones near it, not a test of every entry.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from .spans import SpanIndex

__all__ = ["DecodedCache", "DEFAULT_LIMIT_BYTES"]

#: Bytes of decoded tensors a device keeps by default (a few large models' parameters).
DEFAULT_LIMIT_BYTES = 256 << 20


@dataclass
class _Entry:
    value: Any
    version: int
    nbytes: int
    span: tuple[int, int, int, int]  # group, groups, address, LW count
    owner: Any
    #: The DRAM range does not hold the value's bytes yet (see the module docstring).
    dirty: bool = False
    #: The layout a dirty value is laid out in when flushed.
    layout: Any = None
    #: No other entry overlaps this one's range (known since it was put; see put_dirty).
    alone: bool = False


class DecodedCache:
    """Decoded tensors by key, each tied to the DRAM range it was decoded from.

    Parameters
    ----------
    limit_bytes : int
        Most bytes of tensors held at once; a larger tensor is not kept. 0 disables the cache.
    flush : callable, optional
        ``flush(entry)`` lays a dirty entry's value out into its DRAM range; required to keep
        dirty entries (:meth:`put` with ``dirty=True``).
    """

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES,
                 flush: Callable[[Any], None] | None = None):
        if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
            raise ValueError(f"The decoded-value cache limit must be a non-negative number of "
                             f"bytes, not {limit_bytes!r}")
        self.limit_bytes = limit_bytes
        self.nbytes = 0
        self.flush = flush
        #: Dirty entries held (a quick "nothing owed" check on every DRAM access).
        self.dirty = 0
        self._entries: collections.OrderedDict[Hashable, _Entry] = collections.OrderedDict()
        # The overlap indexes (module docstring): every entry, and the dirty ones.
        self._index = SpanIndex()
        self._dirty = SpanIndex()
        # The keys of each owner's entries, by the owner's id (an entry holds its owner, so
        # the id is not reused while listed): what drop_owner forgets without a scan.
        self._owned: dict[int, dict[Hashable, None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def dirty_bounds(self) -> tuple[int, int]:
        """LW addresses ``[lo, hi)`` around every dirty entry's range (at least): a range
        outside them needs no :meth:`flush_range`."""
        return self._dirty.bounds if self.dirty else (0, 0)

    def may_be_dirty(self, group: int, groups: int, address: int, count: int) -> bool:
        """False when no dirty entry can overlap the range (it needs no :meth:`flush_range`);
        True when one may."""
        return bool(self.dirty) and self._dirty.may_overlap(group, groups, address, count)

    @property
    def entries(self) -> collections.OrderedDict[Hashable, Any]:
        """The entries by key, least recently used first: read-only, for a caller that
        inlines :meth:`get` (an entry's ``value`` is what :meth:`get` returns while
        ``value._version == version``; a hit moves the key to the end)."""
        return self._entries

    def get(self, key: Hashable) -> Any:
        """The tensor kept under ``key``, or None (also when it was modified in place since)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.value._version != entry.version:
            if entry.dirty:
                # Its bytes were never laid out: the DRAM content is lost. Programs only read
                # their inputs, and the caller's tensors are copy-on-write clones (a host
                # input's, what .cpu() hands out): a guard, a bug of the model if it fires.
                raise RuntimeError(f"The write-back value of {key!r} was modified in place "
                                   "before it reached DRAM")
            # Changed in place by its reader: no longer what the DRAM holds.
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.value

    def put(self, key: Hashable, value: Any, span: tuple[int, int, int, int],
            owner: Any = None, *, dirty: bool = False, layout: Any = None) -> bool:
        """Keep ``value`` (a torch tensor owning its memory) decoded from the LW range ``span``
        = (group, groups, address, count); ``owner`` is what :meth:`drop_owners` matches.

        With ``dirty``, ``value`` is what the range must hold in ``layout`` but does not yet
        (the caller has dropped every entry overlapping it first). Returns whether the value
        is kept: a value over the limit is not (a dirty one must then be stored at once)."""
        if key in self._entries:
            self._drop(key, flush=True)
        found = self._index.overlapping(*span)
        for other in found:
            self._entries[other].alone = False
        return self._insert(key, value, span, owner, dirty, layout, alone=not found)

    def _insert(self, key: Hashable, value: Any, span: tuple[int, int, int, int], owner: Any,
                dirty: bool, layout: Any, alone: bool) -> bool:
        """:meth:`put` once ``key`` is not held; ``alone``: no other entry overlaps ``span``."""
        nbytes = value.element_size() * value.nelement()
        if nbytes > self.limit_bytes or (dirty and self.flush is None):
            return False
        while self.nbytes + nbytes > self.limit_bytes:
            self._drop(next(iter(self._entries)), flush=True)
        self._entries[key] = _Entry(value, value._version, nbytes, span, owner, dirty, layout,
                                    alone)
        self._own(key, owner)
        self._index.add(key, span)
        if dirty:
            self._dirty.add(key, span)
        self.nbytes += nbytes
        self.dirty += dirty
        return True

    def put_dirty(self, key: Hashable, value: Any, span: tuple[int, int, int, int],
                  owner: Any, layout: Any) -> bool:
        """:meth:`invalidate` the whole ``span`` (covered), then :meth:`put` ``value`` there,
        dirty: what storing a write-back value does. When the one entry over the range is
        ``key``'s own, over the same range and of the same size (a state updated in place,
        step after step), it is replaced where it stands. An entry put here is alone over its
        range (everything overlapping it was just dropped) until a plain :meth:`put`
        overlaps it, so storing it again needs no lookup."""
        entry = self._entries.get(key)
        if entry is not None and entry.alone:
            found = [key]
        else:
            found = self._index.overlapping(*span)
        if (entry is not None and len(found) == 1 and found[0] == key and entry.span == span
                and entry.nbytes == value.element_size() * value.nelement()
                and self.flush is not None):
            if not entry.dirty:
                entry.dirty = True
                self.dirty += 1
                self._dirty.add(key, span)
            entry.value, entry.version = value, value._version
            if entry.owner is not owner:
                self._disown(key, entry.owner)
                self._own(key, owner)
            entry.owner, entry.layout = owner, layout
            self._entries.move_to_end(key)
            return True
        entries = self._entries
        if (entry is None and len(found) == 1 and self.flush is not None
                and self._rekey(found[0], key, value, span, owner, layout)):
            return True
        if entry is not None and entry.alone and entry.span != span:
            found = self._index.overlapping(*span)  # its own range is not this one
        for other in found:
            self._drop(other, flush=not _inside(entries[other].span, *span))
        if key in entries:  # held, outside the range: laid out before it is forgotten
            self._drop(key, flush=True)
        return self._insert(key, value, span, owner, True, layout, alone=True)

    def replace_dirty(self, key: Hashable, value: Any, layout: Any) -> bool:
        """:meth:`put_dirty` of ``value`` under ``key`` over that entry's own range, when it
        is where it stands: the entry is dirty, alone over its range and of the same size (a
        host input written into its buffer call after call). Says whether it was; when not,
        nothing changed (the caller takes :meth:`put_dirty`)."""
        entry = self._entries.get(key)
        if (entry is None or not entry.dirty or not entry.alone
                or entry.nbytes != value.element_size() * value.nelement()):
            return False
        entry.value, entry.version, entry.layout = value, value._version, layout
        self._entries.move_to_end(key)
        return True

    def rekey_alone(self, other: Hashable, key: Hashable, value: Any,
                    span: tuple[int, int, int, int], owner: Any, layout: Any) -> bool:
        """:meth:`put_dirty` of ``value`` under ``key`` over ``span`` when ``other``'s entry
        is the one there: dirty, alone over its range and over the very ``span`` (then it is
        the only entry the range overlaps, and put_dirty would give it to ``key``, or
        replace it where it stands when ``other`` is ``key``). Says whether it was; when
        not, nothing changed (the caller takes :meth:`put_dirty`)."""
        if other == key:
            return self.replace_dirty(key, value, layout)
        old = self._entries.get(other)
        if (old is None or not old.dirty or not old.alone or old.span != span
                or key in self._entries or self.flush is None):
            return False
        return self._rekey(other, key, value, span, owner, layout)

    def _rekey(self, other: Hashable, key: Hashable, value: Any,
               span: tuple[int, int, int, int], owner: Any, layout: Any) -> bool:
        """:meth:`put_dirty` of a new ``key`` over the range of one entry, ``other``, of the
        same range and size (the next call's output in the buffer the last one freed): that
        entry becomes ``key``'s, in place, when it can; says whether it did. What the general
        path does (``other`` dropped unflushed, as the new value covers it; ``key`` put, last
        in LRU order, alone over its range), without working the range out again."""
        old = self._entries[other]
        if old.span != span or old.nbytes != value.element_size() * value.nelement():
            return False
        del self._entries[other]
        self._disown(other, old.owner)
        self._index.rename(other, key)
        if old.dirty:
            self._dirty.rename(other, key)
        else:
            self._dirty.add(key, span)
            self.dirty += 1
        old.value, old.version, old.owner, old.layout = value, value._version, owner, layout
        old.dirty = old.alone = True
        self._entries[key] = old
        self._own(key, owner)
        return True

    def is_dirty(self, key: Hashable) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.dirty

    def flush_range(self, group: int, groups: int, address: int, count: int) -> None:
        """Lay out every dirty value overlapping the range (before the range is observed);
        they stay, clean."""
        if not self.dirty:
            return
        entries = self._entries
        for key in self._dirty.overlapping(group, groups, address, count):
            self._flush(key, entries[key])

    def dirty_within(self, group: int, groups: int, address: int, count: int
                     ) -> list[tuple[Hashable, Any]]:
        """The dirty entries whose range lies inside the range, as (key, owner)."""
        if not self.dirty:
            return []
        entries = self._entries
        return [(key, entries[key].owner)
                for key in self._dirty.overlapping(group, groups, address, count)
                if _inside(entries[key].span, group, groups, address, count)]

    def vacate(self, key: Hashable, span: tuple[int, int, int, int]) -> bool:
        """Let go of ``key``'s tensor and keep its entry's place, when the entry is dirty,
        alone over its range and over the very ``span``: what :meth:`discard` does for a
        Launch about to store over the range that wants the tensor's memory back before it
        computes, for a caller whose store then hands the place on (:meth:`rekey_alone`).
        Until then the entry holds no tensor: the caller hands it on or discards it before
        anything else looks at the cache. Says whether it did."""
        old = self._entries.get(key)
        if old is None or not old.dirty or not old.alone or old.span != span:
            return False
        old.value = None
        return True

    def discard(self, key: Hashable) -> None:
        """Forget ``key``'s tensor without laying it out, dirty or not: for a caller that
        overwrites its whole range before anything can look at it."""
        if key in self._entries:
            self._drop(key, flush=False)

    def invalidate(self, group: int, groups: int, address: int, count: int, *,
                   covers: bool = False) -> None:
        """Forget every tensor decoded from LWs that overlap the range written.

        A dirty value is laid out first, unless ``covers`` says the writer overwrites every
        LW of the range and the value lies inside it (its bytes would all be overwritten)."""
        if not self._entries:
            return
        entries = self._entries
        for key in self._index.overlapping(group, groups, address, count):
            flush = not (covers and _inside(entries[key].span, group, groups, address, count))
            self._drop(key, flush=flush)

    def drop_owner(self, owner: Any) -> None:
        """Forget every clean tensor of ``owner`` (a freed buffer, say): :meth:`drop_owners`
        of one owner, without a test of every entry."""
        keys = self._owned.get(id(owner))
        if keys:
            for key in [k for k in keys if not self._entries[k].dirty]:
                self._drop(key)

    def drop_owners(self, keep: Callable[[Any], bool]) -> None:
        """Forget every clean tensor whose owner ``keep`` rejects (say, a freed buffer); a
        dirty one stays until its range is overwritten or it is laid out."""
        for key in [k for k, e in self._entries.items() if not e.dirty and not keep(e.owner)]:
            self._drop(key)

    def clear(self) -> None:
        """Forget every tensor (dirty ones laid out first)."""
        for key, entry in self._entries.items():
            if entry.dirty:
                self._flush(key, entry)
        self._entries.clear()
        self._index.clear()
        self._dirty.clear()
        self._owned.clear()
        self.nbytes = 0

    def _flush(self, key: Hashable, entry: _Entry) -> None:
        assert self.flush is not None  # put keeps no dirty entry without it
        if entry.value._version != entry.version:
            raise RuntimeError("A write-back value was modified in place before it reached "
                               "DRAM")
        self.flush(entry)
        entry.dirty = False
        self.dirty -= 1
        self._dirty.remove(key)

    def _drop(self, key: Hashable, *, flush: bool = True) -> None:
        entry = self._entries[key]
        if entry.dirty:
            if flush:
                self._flush(key, entry)
            else:
                self.dirty -= 1
                self._dirty.remove(key)
        del self._entries[key]
        self._disown(key, entry.owner)
        self._index.remove(key)
        self.nbytes -= entry.nbytes

    def _own(self, key: Hashable, owner: Any) -> None:
        keys = self._owned.get(id(owner))
        if keys is None:
            self._owned[id(owner)] = {key: None}
        else:
            keys[key] = None

    def _disown(self, key: Hashable, owner: Any) -> None:
        keys = self._owned[id(owner)]
        del keys[key]
        if not keys:
            del self._owned[id(owner)]


def _inside(span: tuple[int, int, int, int], group: int, groups: int, address: int,
            count: int) -> bool:
    g, gs, a, c = span
    return group <= g and g + gs <= group + groups and address <= a and a + c <= address + count
