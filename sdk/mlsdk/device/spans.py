"""An index of DRAM ranges by address: which of its ranges overlap a given one.

The functional model asks it on every DRAM write and observation (:mod:`.decoded`), so a lookup
must cost the few ranges near the one asked about, not a test of every range. The LW addresses
are cut into blocks on a few levels: level ``k`` has blocks of ``BLOCK_LW * 16**k`` LWs, and a
range is listed, on the lowest level where it spans fewer than 16 blocks, in each block it
covers. A lookup visits, on each level that lists any range, the blocks it covers (or that
level's ranges, when they are fewer than the blocks), and tests the ranges it finds: a dict
lookup or two per level and a test per nearby range, however large the ranges are.

A range is ``(group, groups, address, count)``: the LWs ``[address, address + count)`` of the
Groups ``group .. group + groups - 1``. An empty range (``count`` 0) overlaps nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

__all__ = ["BLOCK_LW", "SpanIndex"]

#: LWs per block of the lowest level (a power of two).
BLOCK_LW = 256
#: Each level's blocks are this many of the level below's; a range is listed on the lowest
#: level where it spans fewer blocks than this.
_FAN = 16
#: The address shift of each level's blocks: up to blocks of 2**36 LWs (512 GiB).
_SHIFTS = tuple(range(BLOCK_LW.bit_length() - 1, 37, _FAN.bit_length() - 1))

Span = tuple[int, int, int, int]


class SpanIndex:
    """Ranges by key, and which of them overlap a range (see the module docstring)."""

    __slots__ = ("_active", "_blocks", "_groups", "_hi", "_levels", "_lo", "_spans", "_visited")

    def __init__(self) -> None:
        # Per level: block number -> the keys listed in it; and the keys on the level.
        self._blocks: list[dict[int, dict[Hashable, None]]] = [{} for _ in _SHIFTS]
        self._levels: list[dict[Hashable, None]] = [{} for _ in _SHIFTS]
        #: Each key's range and the level it is listed on (-1: empty, not listed).
        self._spans: dict[Hashable, tuple[Span, int]] = {}
        #: The levels ever listing a key, with their shift, blocks and keys (what a lookup
        #: visits).
        self._active: tuple[tuple[int, dict, dict], ...] = ()
        self._visited = 0  # bit k: level k is in _active
        # Bounds of every listed range's LW addresses (at least: a removal may leave them
        # wider), so a lookup away from all of them costs two comparisons.
        self._lo, self._hi = 0, 0
        # The same bounds per Group (at least), by Group: a range in Groups the listed ones
        # leave alone, or away from them in its own Groups, is told at once (may_overlap).
        self._groups: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self._spans)

    @property
    def bounds(self) -> tuple[int, int]:
        """LW addresses ``[lo, hi)`` around every listed range (at least: a removal may leave
        them wider): a range outside them overlaps nothing listed."""
        return self._lo, self._hi

    def may_overlap(self, group: int, groups: int, address: int, count: int) -> bool:
        """False when no listed range can overlap the range (by the per-Group bounds); True
        when one may (ask :meth:`overlapping`)."""
        if count <= 0 or address >= self._hi or address + count <= self._lo:
            return False
        bounds = self._groups
        end = address + count
        for g in range(group, group + groups):
            lohi = bounds.get(g)
            if lohi is not None and address < lohi[1] and end > lohi[0]:
                return True
        return False

    def __contains__(self, key: Hashable) -> bool:
        return key in self._spans

    def add(self, key: Hashable, span: Span) -> None:
        """List ``key`` over ``span`` (a key listed already is moved)."""
        if key in self._spans:
            self.remove(key)
        if span[3] <= 0:
            self._spans[key] = (span, -1)
            return
        address, end = span[2], span[2] + span[3] - 1
        top = len(_SHIFTS) - 1
        for level, shift in enumerate(_SHIFTS):
            first, last = address >> shift, end >> shift
            if last - first < _FAN or level == top:
                break
        self._spans[key] = (span, level)
        bounds = self._groups
        for g in range(span[0], span[0] + span[1]):
            lohi = bounds.get(g)
            if lohi is None:
                bounds[g] = [address, end + 1]
            else:
                if address < lohi[0]:
                    lohi[0] = address
                if end >= lohi[1]:
                    lohi[1] = end + 1
        if len(self._spans) == 1:
            self._lo, self._hi = address, end + 1
        else:
            if address < self._lo:
                self._lo = address
            if end >= self._hi:
                self._hi = end + 1
        if not self._visited >> level & 1:
            self._activate(level)
        self._levels[level][key] = None
        blocks = self._blocks[level]
        for block in range(first, last + 1):
            keys = blocks.get(block)
            if keys is None:
                blocks[block] = {key: None}
            else:
                keys[key] = None

    def remove(self, key: Hashable) -> None:
        """Forget ``key`` (KeyError if it is not listed)."""
        span, level = self._spans.pop(key)
        if level < 0:
            return
        if len(self._spans) <= 8 and self._bounded_by(span):
            self._regroup()
        if not self._spans:
            self._lo, self._hi = 0, 0
        elif (len(self._spans) <= 8
              and (span[2] == self._lo or span[2] + span[3] == self._hi)):
            # A bound was this range's, and few are left: their bounds again, exactly.
            lo, hi, listed = 0, 0, False
            for s, lv in self._spans.values():
                if lv >= 0:
                    if not listed or s[2] < lo:
                        lo = s[2]
                    if not listed or s[2] + s[3] > hi:
                        hi = s[2] + s[3]
                    listed = True
            self._lo, self._hi = lo, hi
        del self._levels[level][key]
        shift = _SHIFTS[level]
        blocks = self._blocks[level]
        for block in range(span[2] >> shift, ((span[2] + span[3] - 1) >> shift) + 1):
            keys = blocks[block]
            del keys[key]
            if not keys:
                del blocks[block]

    def _bounded_by(self, span: Span) -> bool:
        """Whether ``span`` sets a bound of one of its Groups."""
        bounds = self._groups
        end = span[2] + span[3]
        for g in range(span[0], span[0] + span[1]):
            lohi = bounds.get(g)
            if lohi is not None and (lohi[0] == span[2] or lohi[1] == end):
                return True
        return False

    def _regroup(self) -> None:
        """The per-Group bounds again, exactly (few ranges are left)."""
        bounds: dict[int, list[int]] = {}
        for (group, groups, address, count), level in self._spans.values():
            if level < 0:
                continue
            for g in range(group, group + groups):
                lohi = bounds.get(g)
                if lohi is None:
                    bounds[g] = [address, address + count]
                else:
                    lohi[0] = min(lohi[0], address)
                    lohi[1] = max(lohi[1], address + count)
        self._groups = bounds

    def rename(self, old: Hashable, new: Hashable) -> None:
        """List ``new`` over ``old``'s range in its place (KeyError if ``old`` is not listed
        or ``new`` is): :meth:`remove` and :meth:`add` without working the range out again."""
        if new in self._spans:
            raise KeyError(new)
        span, level = self._spans.pop(old)
        self._spans[new] = (span, level)
        if level < 0:
            return
        keys = self._levels[level]
        del keys[old]
        keys[new] = None
        shift = _SHIFTS[level]
        blocks = self._blocks[level]
        for block in range(span[2] >> shift, ((span[2] + span[3] - 1) >> shift) + 1):
            listed = blocks[block]
            del listed[old]
            listed[new] = None

    def overlapping(self, group: int, groups: int, address: int, count: int) -> list[Hashable]:
        """The keys whose range overlaps ``(group, groups, address, count)``, each once."""
        if count <= 0 or address >= self._hi or address + count <= self._lo:
            return []
        spans = self._spans
        top, end = group + groups, address + count
        found: dict[Hashable, None] = {}
        for shift, blocks, keys in self._active:
            if not keys:
                continue
            first, last = address >> shift, (end - 1) >> shift
            candidates: Iterable[Hashable]
            if last - first >= len(keys):
                candidates = keys
            elif first == last:
                candidates = blocks.get(first, ())
            else:
                candidates = [k for b in range(first, last + 1) for k in blocks.get(b, ())]
            for key in candidates:
                span = spans[key][0]
                if (span[0] < top and group < span[0] + span[1]
                        and span[2] < end and address < span[2] + span[3]):
                    found[key] = None
        return list(found)

    def _activate(self, level: int) -> None:
        """Visit ``level`` on lookups from now on (a level once used stays visited: one
        emptiness test a lookup, and no bookkeeping as ranges come and go)."""
        self._active = tuple(sorted(
            (*self._active, (_SHIFTS[level], self._blocks[level], self._levels[level])),
            key=lambda active: active[0]))
        self._visited |= 1 << level

    def clear(self) -> None:
        self._active = ()
        self._visited = 0
        self._lo, self._hi = 0, 0
        self._groups = {}
        self._spans.clear()
        for blocks, keys in zip(self._blocks, self._levels, strict=True):
            blocks.clear()
            keys.clear()
