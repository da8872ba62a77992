"""First-fit DRAM allocator: a buffer takes the same LW range in each Group it spans."""

from __future__ import annotations

import bisect
import itertools

from mncore_hdl.arch import LW_BYTES

from ..errors import DeviceMemoryError
from .commands import Buffer

__all__ = ["Allocator"]

#: Buffers start on this LW boundary (one DRAM burst), so every buffer begins a fresh burst.
ALIGN_LW = 8


class Allocator:
    """Tracks the used LW ranges of every Group.

    Parameters
    ----------
    groups : int
        Groups on the device.
    lw_per_group : int
        LW addresses in each Group's DRAM.
    """

    def __init__(self, groups: int, lw_per_group: int):
        self.groups = groups
        self.lw_per_group = lw_per_group
        # Per Group: sorted, disjoint [start, end) ranges in use.
        self._used: list[list[tuple[int, int]]] = [[] for _ in range(groups)]
        self._live: dict[int, Buffer] = {}
        self._ids = itertools.count(1)

    @property
    def live(self) -> dict[int, Buffer]:
        """The buffers currently allocated, by id."""
        return dict(self._live)

    def used_lw(self, group: int) -> int:
        return sum(end - start for start, end in self._used[group])

    def allocate(self, groups: int, lw_per_group: int) -> Buffer:
        """A new buffer of ``lw_per_group`` LWs in each of ``groups`` consecutive Groups.

        Tries every starting Group, least-used first, and the lowest address free in all the
        Groups it needs. Raises DeviceMemoryError when nothing fits.
        """
        if groups > self.groups:
            raise DeviceMemoryError(
                f"A buffer spanning {groups} Groups cannot fit a device of {self.groups} Groups"
            )
        size = -(-lw_per_group // ALIGN_LW) * ALIGN_LW
        starts = sorted(range(self.groups - groups + 1),
                        key=lambda g: (sum(self.used_lw(g + i) for i in range(groups)), g))
        for first in starts:
            address = self._first_fit(range(first, first + groups), size)
            if address is not None:
                buf = Buffer(next(self._ids), first, groups, address, lw_per_group)
                for g in range(first, first + groups):
                    bisect.insort(self._used[g], (address, address + size))
                self._live[buf.id] = buf
                return buf
        free_lw = max(self.lw_per_group - self.used_lw(g) for g in range(self.groups))
        raise DeviceMemoryError(
            f"Device DRAM exhausted: a buffer of {lw_per_group * groups * LW_BYTES} bytes "
            f"({groups} Group(s) x {lw_per_group} LW) does not fit; the freest Group has "
            f"{free_lw * LW_BYTES} bytes left of {self.lw_per_group * LW_BYTES}. Free "
            "TensorProxies you no longer need (del them) or use smaller tensors."
        )

    def _first_fit(self, groups: range, size: int) -> int | None:
        ranges = sorted(r for g in groups for r in self._used[g])
        address = 0
        for start, end in ranges:
            if start - address >= size:
                break
            address = max(address, end)
        return address if address + size <= self.lw_per_group else None

    def free(self, buf: Buffer) -> None:
        """Release ``buf``; freeing a buffer twice is an error."""
        if self._live.pop(buf.id, None) is None:
            raise ValueError(f"Buffer {buf} is not allocated (freed twice?)")
        size = -(-buf.lw_per_group // ALIGN_LW) * ALIGN_LW
        for g in range(buf.group, buf.group + buf.groups):
            self._used[g].remove((buf.address, buf.address + size))

    def is_live(self, buf: Buffer) -> bool:
        return self._live.get(buf.id) == buf
