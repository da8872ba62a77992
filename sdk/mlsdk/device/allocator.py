"""First-fit DRAM allocator: a buffer takes the same LW range in each Group it spans.

Thread-safe: every method runs under the allocator's own lock. A buffer whose owner was
garbage-collected is handed back with :meth:`Allocator.release`, which never blocks (a
finalizer may run in any thread, and inside any allocator call of its own thread): it queues
the buffer, and the queue is emptied under the lock by the next allocator call.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import threading

from mncore_hdl.arch import LW_BYTES

from ..errors import DeviceMemoryError
from .commands import Buffer

__all__ = ["Allocator"]

#: Buffers start on this LW boundary (one DRAM burst), so every buffer begins a fresh burst.
ALIGN_LW = 8

#: Owners listed by name in an out-of-memory error (the rest are summed).
_OWNERS_SHOWN = 8
#: Sorts after every (start, end) range of the same start (bisection keys).
_AFTER_ANY = float("inf")


class Allocator:
    """Tracks the used LW ranges of every Group, and who holds each buffer.

    Parameters
    ----------
    groups : int
        Groups on the device.
    lw_per_group : int
        LW addresses in each Group's DRAM.
    remember_places : bool
        Remember where buffers go per state of the ranges in use (see :meth:`remembers`);
        False searches for every buffer's place (the same places, found again).
    """

    def __init__(self, groups: int, lw_per_group: int, remember_places: bool = True):
        self.groups = groups
        self.lw_per_group = lw_per_group
        # Per Group: sorted, disjoint [start, end) ranges in use.
        self._used: list[list[tuple[int, int]]] = [[] for _ in range(groups)]
        self._live: dict[int, Buffer] = {}
        self._owners: dict[int, str] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._released: collections.deque[Buffer] = collections.deque()
        # Per Group: LWs in use (the sum over _used, kept up to date).
        self._used_total = [0] * groups
        # A number naming the ranges in use: every change gives a fresh one, except freeing
        # the buffer the last change allocated, which gives back the one before (the ranges
        # are then exactly what they were). Where a buffer goes is a function of the ranges,
        # so it is remembered by (number, groups, size): a call that frees its last output
        # before the next call allocates the same size finds the place without a search.
        self._numbers = itertools.count(1)
        self._state = 0
        # (id of the buffer the last change allocated, the number before it)
        self._undo: tuple[int, int] | None = None
        self._places: dict[tuple[int, int, int], tuple[int, int] | None] = {}
        self._remember = remember_places

    @property
    def by_id(self) -> dict[int, Buffer]:
        """The live buffers by id, as held (read-only; not a copy, so no lock): a buffer
        released from a finalizer stays in it until drained, so it says a buffer is live
        only while :attr:`pending` is empty (what :meth:`is_live` does in one call)."""
        return self._live

    @property
    def pending(self) -> collections.deque[Buffer]:
        """Buffers released from finalizers and not yet freed (read-only)."""
        return self._released

    @property
    def live(self) -> dict[int, Buffer]:
        """The buffers currently allocated, by id."""
        with self._lock:
            self._drain()
            return dict(self._live)

    def owners(self) -> dict[str, tuple[int, int]]:
        """Per owner: (buffers, bytes) of the live buffers it holds, largest first."""
        with self._lock:
            self._drain()
            return self._owner_totals()

    def used_lw(self, group: int) -> int:
        with self._lock:
            self._drain()
            return self._used_lw(group)

    def _used_lw(self, group: int) -> int:
        return self._used_total[group]

    def allocate(self, groups: int, lw_per_group: int, owner: str = "unowned") -> Buffer:
        """A new buffer of ``lw_per_group`` LWs in each of ``groups`` consecutive Groups.

        Tries every starting Group, least-used first, and the lowest address free in all the
        Groups it needs. ``owner`` names who holds it (shown when memory runs out). Raises
        DeviceMemoryError, listing the largest holders, when nothing fits.
        """
        if groups > self.groups:
            raise DeviceMemoryError(
                f"A buffer spanning {groups} Groups cannot fit a device of {self.groups} Groups"
            )
        size = -(-lw_per_group // ALIGN_LW) * ALIGN_LW
        with self._lock:
            self._drain()
            used = self._used_total
            place = self._place(groups, size)
            if place is not None:
                first, address = place
                buf = Buffer(next(self._ids), first, groups, address, lw_per_group)
                for g in range(first, first + groups):
                    bisect.insort(self._used[g], (address, address + size))
                    self._used_total[g] += size
                self._live[buf.id] = buf
                self._owners[buf.id] = owner
                self._undo = (buf.id, self._state)
                self._state = next(self._numbers)
                return buf
            free_lw = max(self.lw_per_group - u for u in used)
            holders = self._describe_owners()
        raise DeviceMemoryError(
            f"Device DRAM exhausted: a buffer of {lw_per_group * groups * LW_BYTES} bytes "
            f"({groups} Group(s) x {lw_per_group} LW) for {owner} does not fit; the freest "
            f"Group has {free_lw * LW_BYTES} bytes left of {self.lw_per_group * LW_BYTES}. "
            f"Held by: {holders}. Free what you no longer need: del or .free() TensorProxies, "
            "del or .unload() compiled functions."
        )

    def _place(self, groups: int, size: int) -> tuple[int, int] | None:
        """Where a buffer of ``size`` LWs in ``groups`` Groups goes, as (first Group,
        address), or None: the least-used Groups first, at the lowest address free in all
        of them (remembered for the ranges in use now)."""
        key = (self._state, groups, size)
        places = self._places
        if key in places:
            return places[key]
        used = self._used_total
        starts = (sorted(range(self.groups - groups + 1),
                         key=lambda g: (sum(used[g:g + groups]), g))
                  if groups < self.groups else (0,))
        place = None
        for first in starts:
            address = self.first_fit(range(first, first + groups), size)
            if address is not None:
                place = (first, address)
                break
        if self._remember:
            if len(places) >= 256:
                places.clear()
            places[key] = place
        return place

    def remembers(self, groups: int, lw_per_group: int) -> bool:
        """Whether where a buffer of ``lw_per_group`` LWs in ``groups`` Groups goes now is
        remembered (found without a search): the ranges in use are those of an earlier
        allocation of that size (a number names them; freeing the buffer the last change
        allocated gives back the number before it, as the ranges are then exactly what they
        were)."""
        size = -(-lw_per_group // ALIGN_LW) * ALIGN_LW
        with self._lock:
            self._drain()
            return (self._state, groups, size) in self._places

    def first_fit(self, groups: range, size: int) -> int | None:
        """The lowest address where ``size`` LWs are free in every one of ``groups``, or
        None. Each Group's ranges are sorted and disjoint: a window overlapping a range
        cannot start before that range's end, so the window jumps there until no Group has a
        range in it (a few bisections, not a pass over every buffer)."""
        lists = [self._used[g] for g in groups]
        address, moved = 0, True
        while moved:
            moved = False
            for ranges in lists:
                i = bisect.bisect_right(ranges, (address, _AFTER_ANY))
                if i and ranges[i - 1][1] > address:  # a range holds the window's start
                    address, moved = ranges[i - 1][1], True
                elif i < len(ranges) and ranges[i][0] < address + size:  # one starts inside
                    address, moved = ranges[i][1], True
        return address if address + size <= self.lw_per_group else None

    def free(self, buf: Buffer) -> None:
        """Release ``buf`` now; freeing a buffer twice is an error."""
        with self._lock:
            self._drain()
            self._free(buf)

    def release(self, buf: Buffer) -> None:
        """Release ``buf`` if it is still allocated, from any thread, without ever blocking
        (for finalizers): it is freed now when the lock is free, else by the next call."""
        self._released.append(buf)
        if self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()

    def is_live(self, buf: Buffer) -> bool:
        if not self._released:
            # Nothing queued to free: one dict lookup (atomic under the GIL) says it.
            live = self._live.get(buf.id)
            return live is buf or live == buf
        with self._lock:
            self._drain()
            return self._live.get(buf.id) == buf

    # -- under the lock ---------------------------------------------------------------------

    def _drain(self) -> None:
        while self._released:
            buf = self._released.popleft()
            if self._live.get(buf.id) == buf:
                self._free(buf)

    def _free(self, buf: Buffer) -> None:
        if self._live.pop(buf.id, None) is None:
            raise ValueError(f"Buffer {buf} is not allocated (freed twice?)")
        self._owners.pop(buf.id, None)
        size = -(-buf.lw_per_group // ALIGN_LW) * ALIGN_LW
        extent = (buf.address, buf.address + size)
        for g in range(buf.group, buf.group + buf.groups):
            ranges = self._used[g]  # sorted and disjoint: the extent is found by bisection
            del ranges[bisect.bisect_left(ranges, extent)]
            self._used_total[g] -= size
        undo, self._undo = self._undo, None
        self._state = undo[1] if undo is not None and undo[0] == buf.id else next(self._numbers)

    def _owner_totals(self) -> dict[str, tuple[int, int]]:
        totals: dict[str, list[int]] = {}
        for buf_id, buf in self._live.items():
            entry = totals.setdefault(self._owners.get(buf_id, "unowned"), [0, 0])
            entry[0] += 1
            entry[1] += buf.nbytes
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return {owner: (n, nbytes) for owner, (n, nbytes) in ranked}

    def _describe_owners(self) -> str:
        totals = list(self._owner_totals().items())
        if not totals:
            return "nothing (the buffer is larger than a Group's DRAM)"
        parts = [f"{owner}: {nbytes} bytes in {n} buffer(s)"
                 for owner, (n, nbytes) in totals[:_OWNERS_SHOWN]]
        rest = totals[_OWNERS_SHOWN:]
        if rest:
            parts.append(f"{len(rest)} other owner(s): "
                         f"{sum(nbytes for _, (_, nbytes) in rest)} bytes")
        return "; ".join(parts)
