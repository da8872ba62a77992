"""Tensors decoded from DRAM, kept while their DRAM range is unchanged (the functional model's
Launch reads a registered parameter or a program constant once, not once per call).

Decoding a buffer from a compute-native layout (:func:`mncore_hdl.layout.from_device`) costs a
strided copy of the whole buffer, as much as uploading it again from the host. A
:class:`DecodedCache` remembers the tensor decoded from a buffer in a layout until a write
overlaps the buffer's LW range: the DRAM store it belongs to calls :meth:`DecodedCache.invalidate`
on every write (host writes, Launch outputs, conversion destinations, pokes), so a hit returns
exactly what decoding the DRAM again would. It holds at most ``limit_bytes`` of tensors (least
recently used first out), and the device drops a buffer's entries when the buffer is freed.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

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


class DecodedCache:
    """Decoded tensors by key, each tied to the DRAM range it was decoded from.

    Parameters
    ----------
    limit_bytes : int
        Most bytes of tensors held at once; a larger tensor is not kept. 0 disables the cache.
    """

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES):
        if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
            raise ValueError(f"The decoded-value cache limit must be a non-negative number of "
                             f"bytes, not {limit_bytes!r}")
        self.limit_bytes = limit_bytes
        self.nbytes = 0
        self._entries: collections.OrderedDict[Hashable, _Entry] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any:
        """The tensor kept under ``key``, or None (also when it was modified in place since)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.value._version != entry.version:
            # Changed in place by its reader: no longer what the DRAM holds.
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.value

    def put(self, key: Hashable, value: Any, span: tuple[int, int, int, int],
            owner: Any = None) -> None:
        """Keep ``value`` (a torch tensor owning its memory) decoded from the LW range ``span``
        = (group, groups, address, count); ``owner`` is what :meth:`drop_owners` matches."""
        nbytes = value.element_size() * value.nelement()
        if key in self._entries:
            self._drop(key)
        if nbytes > self.limit_bytes:
            return
        while self.nbytes + nbytes > self.limit_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[key] = _Entry(value, value._version, nbytes, span, owner)
        self.nbytes += nbytes

    def invalidate(self, group: int, groups: int, address: int, count: int) -> None:
        """Forget every tensor decoded from LWs that overlap the range written."""
        if not self._entries:
            return
        stale = [key for key, e in self._entries.items()
                 if _overlap(e.span, group, groups, address, count)]
        for key in stale:
            self._drop(key)

    def drop_owners(self, keep: Callable[[Any], bool]) -> None:
        """Forget every tensor whose owner ``keep`` rejects (say, a freed buffer)."""
        for key in [k for k, e in self._entries.items() if not keep(e.owner)]:
            self._drop(key)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _drop(self, key: Hashable) -> None:
        self.nbytes -= self._entries.pop(key).nbytes


def _overlap(span: tuple[int, int, int, int], group: int, groups: int, address: int,
             count: int) -> bool:
    g, gs, a, c = span
    return g < group + groups and group < g + gs and a < address + count and address < a + c
