"""Compile a conversion descriptor into the layout converter's register program (pure Python).

The converter walks three small loop tables, each a nest of counters whose every step adds one
signed *carry* to a few accumulators (the classic DMA trick: the carry of loop ``k`` is its
stride minus what the inner loops added while they ran, so the hardware never multiplies):

- the **outer** table enumerates *blocks*; it yields each block's source Group/address base,
  source lane offset, destination Group/address base and logical index base;
- the **read** table walks the block's source LWs as bursts of ``burst`` LWs (the burst loop
  itself is implicit); LW ``i`` of the walk lands at buffer LW ``i`` of the block's half;
- the **gather** table walks the block's destination LWs in address order; each step yields the
  buffer *element* index (buffer LW * lanes + lane) of lane 0's source, a destination address and
  logical index offsets;
- the **lane** table says, for each destination lane, whether it is used and the element and
  logical offsets of its source relative to the gather position;
- the **split** loop, when the destination spans several Groups and one loop walks them
  (stride one Group, outermost in destination order), is taken out of the outer table: the
  converter has one engine per Group (read streams, buffer, gather, writer), and engine ``k``
  runs the outer table from the base ``k * stride`` (strides, not carries: nothing is inside
  it but the outer table), writing destination Group ``k`` only, all engines at once.

Loops are stored innermost first. Nothing here imports Amaranth, so the functional model and
the timing model can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..arch import LW_BITS, ArchConfig
from ..contracts.converter import MAX_AXES, MAX_LANES, MAX_LOOPS
from ..layout.conversion import ConversionDescriptor, Loop

__all__ = ["MAX_LOOPS", "MAX_AXES", "MAX_LANES", "BLOCK_TARGET_LW", "DEFAULT_BUFFER_LW",
           "READ_QUEUED", "READ_OUTSTANDING",
           "TableLoop", "LaneEntry", "ConverterProgram", "ProgramError", "compile_program",
           "simulate_program", "carries_table", "walk_table", "NO_SPLIT", "engine_bases"]

#: A block stops growing once it reads this many LWs: enough to overlap reads with writes,
#: small enough that the first block's unoverlapped read stays short.
BLOCK_TARGET_LW = 1024
#: Shortest read burst the block choice accepts when it splits the source-contiguous loop.
MIN_BURST = 16
#: The converter's default on-chip buffer (two halves).
DEFAULT_BUFFER_LW = 16384
#: Read bursts the read engine queues per Group ahead of that Group's port (the RTL's and the
#: timing model's; here so the model imports without Amaranth).
READ_QUEUED = 4
#: Read bursts each Group's port may have in flight (requested, beats not all in).
READ_OUTSTANDING = 4


class ProgramError(ValueError):
    """A descriptor the converter cannot execute (the message says which limit and why)."""


@dataclass(frozen=True)
class TableLoop:
    """One counter of a loop table: its extent and the carry added to each accumulator."""

    extent: int
    carries: tuple[int, ...]


@dataclass(frozen=True)
class LaneEntry:
    """Where destination lane ``l`` takes its element from, relative to the gather position."""

    valid: int
    elem: int
    log: tuple[int, ...]


#: The split loop of a program that runs on one engine: extent 1, strides unused.
NO_SPLIT = TableLoop(1, (0,) * (5 + MAX_AXES))


@dataclass(frozen=True)
class ConverterProgram:
    """The register contents for one conversion (bases excluded; see ``registers``).

    Outer accumulators: ``(src_group, src_addr, src_lane, dst_group, dst_addr, log0..log3)``.
    Read accumulators: ``(group, addr)``. Gather accumulators: ``(elem, dst_addr, log0..log3)``.
    ``split``: engines used (its extent) and, per outer accumulator, the stride between two
    engines' bases (:func:`engine_bases`); ``blocks`` counts every engine's blocks.
    """

    elem_bits: int
    dims: tuple[int, ...]
    src_groups: int
    src_lw_per_group: int
    dst_groups: int
    dst_lw_per_group: int
    burst: int
    outer: tuple[TableLoop, ...]
    read: tuple[TableLoop, ...]
    gather: tuple[TableLoop, ...]
    lanes: tuple[LaneEntry, ...]
    half_lw: int
    blocks: int = field(default=1)
    split: TableLoop = field(default=NO_SPLIT)

    @property
    def engines(self) -> int:
        """Engines the program runs on at once (one per destination Group when split)."""
        return self.split.extent

    @property
    def lanes_per_lw(self) -> int:
        return LW_BITS // self.elem_bits

    @property
    def block_read_lw(self) -> int:
        """Source LWs one block reads (the buffer LWs it fills)."""
        return self.burst * math.prod(loop.extent for loop in self.read)

    @property
    def block_write_lw(self) -> int:
        """Destination LWs one block's gather visits (some may be all padding and dropped)."""
        return math.prod(loop.extent for loop in self.gather)

    @property
    def read_lw(self) -> int:
        return self.blocks * self.block_read_lw

    @property
    def write_lw(self) -> int:
        return self.dst_groups * self.dst_lw_per_group


def carries_table(loops: list[tuple[int, tuple[int, ...]]]) -> tuple[TableLoop, ...]:
    """Loops given innermost first as ``(extent, strides)``, with carries instead of strides."""
    out = []
    for k, (extent, strides) in enumerate(loops):
        carries = []
        for q, stride in enumerate(strides):
            back = sum((e - 1) * s[q] for e, s in loops[:k])
            carries.append(stride - back)
        out.append(TableLoop(extent, tuple(carries)))
    return tuple(out)


def _check_nested(loops: list[Loop], level: str, what: str) -> None:
    """Raise unless the loops' strides on ``level`` nest (so the walk is monotonic)."""
    subs = sorted((getattr(lp, level), lp.extent) for lp in loops if getattr(lp, level))
    reach = 0
    for stride, extent in subs:
        if stride <= reach:
            raise ProgramError(
                f"The destination's {what} sub-axes interleave (stride {stride} inside a reach "
                f"of {reach}); the converter writes destinations in address order only"
            )
        reach += (extent - 1) * stride


def _check_dst_order(desc: ConversionDescriptor, order: list[Loop], lane_loops: list[Loop]) -> None:
    """Raise unless walking ``order`` visits the destination LWs holding data strictly increasing.

    Padding may break the nesting of the strides (a refined sub-axis grown past its layout's
    extent), so the walk is checked exactly when it is small enough, else conservatively.
    """
    import numpy as np

    if desc.iterations > 1 << 22:
        for level, what in (("dst_lane", "lane"), ("dst_addr", "address"),
                            ("dst_group", "Group")):
            _check_nested(list(desc.loops), level, what)
        return
    nest = order + lane_loops
    n = len(nest)
    slot = np.zeros((1,) * n, dtype=np.int64)
    logical = [np.zeros((1,) * n, dtype=np.int64) for _ in desc.shape]
    for i, lp in enumerate(nest):
        shape = [1] * n
        shape[i] = lp.extent
        digit = np.arange(lp.extent, dtype=np.int64).reshape(shape)
        slot = slot + digit * (lp.dst_group * desc.dst_lw_per_group + lp.dst_addr)
        logical[lp.axis] = logical[lp.axis] + digit * lp.step
    valid = np.ones((1,) * n, dtype=bool)
    for axis, dim in enumerate(desc.shape):
        valid = valid & (logical[axis] < dim)
    full = tuple(lp.extent for lp in nest)
    words = len(order)
    valid = np.broadcast_to(valid, full).reshape(full[:words] + (-1,)).any(axis=-1).ravel()
    slot = np.broadcast_to(slot, full).reshape(full[:words] + (-1,))[..., 0].ravel()[valid]
    if slot.size > 1 and not np.all(np.diff(slot) > 0):
        raise ProgramError(
            "The destination's sub-axes interleave: walking it in address order does not visit "
            "each LW once in increasing order; the converter writes destinations in order only"
        )


def _split(loop: Loop, inner: int) -> tuple[Loop, Loop]:
    """Split ``loop`` into (outer, inner) loops with the inner one of extent ``inner``."""
    outer = Loop(loop.extent // inner, loop.axis, loop.step * inner,
                 loop.src_group * inner, loop.src_addr * inner, loop.src_lane * inner,
                 loop.dst_group * inner, loop.dst_addr * inner, loop.dst_lane * inner)
    return outer, Loop(inner, *[getattr(loop, f) for f in
                                ("axis", "step", "src_group", "src_addr", "src_lane",
                                 "dst_group", "dst_addr", "dst_lane")])


def engine_bases(prog: ConverterProgram) -> list[tuple[int, ...]]:
    """Each engine's outer accumulators at its first block: ``k * split stride``."""
    return [tuple(k * s for s in prog.split.carries) for k in range(prog.split.extent)]


def _split_loop(outer: list[Loop], desc: ConversionDescriptor,
                engines: int) -> tuple[Loop | None, list[Loop]]:
    """The loop the engines divide (the outermost, walking the destination Groups one by
    one), and the outer loops left; None when there is no such loop."""
    if not outer or desc.dst_groups < 2 or desc.dst_groups > engines:
        return None, outer
    top = outer[0]
    if (top.dst_group != 1 or top.extent != desc.dst_groups
            or any(lp.dst_group for lp in outer[1:])):
        return None, outer
    return top, outer[1:]


def _read_lw(block: list[Loop]) -> int:
    return math.prod(lp.extent for lp in block if lp.src_group or lp.src_addr)


def _choose_block(order: list[Loop], lane_loops: list[Loop],
                  half_lw: int) -> tuple[list[Loop], list[Loop]]:
    """Split the destination-ordered nest (outermost first) into (outer, block) loops.

    The block grows from the innermost loop outwards until it reads ``BLOCK_TARGET_LW`` LWs
    (or half the buffer); the loop that crosses the target is split by the divisor that
    reaches it most closely, so long source bursts and overlap both survive.
    """
    block = list(lane_loops)
    rest = list(order)
    target = min(half_lw, BLOCK_TARGET_LW)
    while rest and not rest[-1].dst_group and len(block) - len(lane_loops) < MAX_LOOPS:
        read = max(1, _read_lw(block))
        if read >= target:
            break
        cand = rest[-1]
        if not (cand.src_group or cand.src_addr):
            block.append(rest.pop())  # a source-lane loop reads nothing more
            continue
        room = half_lw // read
        want = -(-target // read)
        if cand.src_addr == 1 and not cand.src_group:
            want = max(want, MIN_BURST)  # this split sets the read burst: keep it long
        if cand.extent <= min(room, want):
            block.append(rest.pop())
            continue
        divisors = [f for f in range(2, min(room, cand.extent - 1) + 1) if cand.extent % f == 0]
        pick = min((f for f in divisors if f >= want), default=max(divisors, default=0))
        if pick:
            outer, inner = _split(cand, pick)
            rest[-1] = outer
            block.append(inner)
        elif cand.extent <= room:
            block.append(rest.pop())
        break
    return rest, block


def _read_order(block: list[Loop]) -> list[Loop]:
    """The block's LW loops in source order, innermost first (Group level outermost)."""
    lw_loops = [lp for lp in block if lp.src_group or lp.src_addr]
    return sorted(lw_loops, key=lambda lp: (lp.src_group, lp.src_addr))


def _read_table(order: list[Loop], max_burst: int) -> tuple[int, list[tuple[int, tuple]]]:
    """(burst, remaining read loops innermost first as (extent, (g, a) strides))."""
    loops = [(lp.extent, (lp.src_group, lp.src_addr)) for lp in order]
    burst = 1
    while loops and loops[0][1] == (0, burst):
        burst *= loops[0][0]
        loops.pop(0)
    if burst > max_burst:
        unit = max(f for f in range(1, max_burst + 1) if burst % f == 0)
        loops.insert(0, (burst // unit, (0, unit)))
        burst = unit
    return burst, loops


# A pure function of frozen arguments: memoised (a call may convert the same pair again).
@lru_cache(maxsize=256)
def compile_program(desc: ConversionDescriptor, config: ArchConfig,
                    buffer_lw: int = DEFAULT_BUFFER_LW) -> ConverterProgram:
    """Compile ``desc`` for a converter with a ``buffer_lw``-LW double buffer.

    Raises
    ------
    ProgramError
        When the descriptor exceeds a converter limit (loops, axes, lanes, destination order).
    """
    if not isinstance(desc, ConversionDescriptor):
        raise TypeError(f"Descriptor must be a ConversionDescriptor, not {desc!r}")
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if len(desc.shape) > MAX_AXES:
        raise ProgramError(f"The converter masks at most {MAX_AXES} axes, not {len(desc.shape)}")
    lanes = desc.lanes
    half_lw = buffer_lw // 2
    loops = list(desc.loops)
    for lp in loops:
        levels = [lp.dst_group, lp.dst_addr, lp.dst_lane]
        if sum(1 for v in levels if v) != 1:
            raise ProgramError(f"Loop {lp} must move exactly one destination level")
    lane_loops = [lp for lp in loops if lp.dst_lane]
    word_loops = [lp for lp in loops if not lp.dst_lane]
    # Destination order: Group loops outermost, then addresses by decreasing stride.
    order = sorted(word_loops, key=lambda lp: (-lp.dst_group, -lp.dst_addr))
    _check_dst_order(desc, order, lane_loops)
    outer, block = _choose_block(order, lane_loops, half_lw)
    split, outer = _split_loop(outer, desc, config.groups)
    gather_loops = [lp for lp in block if not lp.dst_lane]  # innermost first
    read_order = _read_order(block)
    # Buffer LW stride of each source LW loop: its position weight in the read walk.
    buf_stride: dict[int, int] = {}
    weight = 1
    for lp in read_order:
        buf_stride[id(lp)] = weight
        weight *= lp.extent

    def elem(lp: Loop) -> int:
        return buf_stride[id(lp)] * lanes if id(lp) in buf_stride else lp.src_lane

    def logs(lp: Loop) -> tuple[int, ...]:
        return tuple(lp.step if lp.axis == ax else 0 for ax in range(MAX_AXES))

    burst, read_loops = _read_table(read_order, config.row_lw)
    gather = [(lp.extent, (elem(lp), lp.dst_addr) + logs(lp)) for lp in gather_loops]
    outer_t = [(lp.extent, (lp.src_group, lp.src_addr, lp.src_lane, lp.dst_group, lp.dst_addr)
                + logs(lp)) for lp in reversed(outer)]
    for name, table in (("outer", outer_t), ("read", read_loops), ("gather", gather)):
        if len(table) > MAX_LOOPS:
            raise ProgramError(
                f"The {name} table needs {len(table)} loops; the converter has {MAX_LOOPS}"
            )
    lane_tab = [LaneEntry(0, 0, (0,) * MAX_AXES) for _ in range(MAX_LANES)]
    for digits in _digit_space([lp.extent for lp in lane_loops]):
        lane = sum(d * lp.dst_lane for d, lp in zip(digits, lane_loops, strict=True))
        off = sum(d * elem(lp) for d, lp in zip(digits, lane_loops, strict=True))
        columns = zip(*[logs(lp) for lp in lane_loops], strict=True)
        log = tuple(sum(d * lg for d, lg in zip(digits, col, strict=True))
                    for col in columns) or (0,) * MAX_AXES
        lane_tab[lane] = LaneEntry(1, off, log)
    dims = tuple(desc.shape) + (1,) * (MAX_AXES - len(desc.shape))
    return ConverterProgram(
        elem_bits=desc.elem_bits, dims=dims,
        src_groups=desc.src_groups, src_lw_per_group=desc.src_lw_per_group,
        dst_groups=desc.dst_groups, dst_lw_per_group=desc.dst_lw_per_group,
        burst=burst, outer=carries_table(outer_t), read=carries_table(read_loops),
        gather=carries_table(gather), lanes=tuple(lane_tab[:MAX_LANES]), half_lw=half_lw,
        blocks=math.prod(lp.extent for lp in outer) * (split.extent if split else 1),
        split=NO_SPLIT if split is None else TableLoop(split.extent, (
            split.src_group, split.src_addr, split.src_lane, split.dst_group, split.dst_addr)
            + logs(split)),
    )


def _digit_space(extents: list[int]):
    if not extents:
        yield ()
        return
    for rest in _digit_space(extents[1:]):
        for d in range(extents[0]):
            yield (d,) + rest


# -- a plain Python interpreter of the program: the converter's behaviour, step by step ----------

def walk_table(table: tuple[TableLoop, ...], nq: int):
    """Yield the accumulators of every step of a loop table (innermost first)."""
    acc = [0] * nq
    count = [0] * len(table)
    while True:
        yield tuple(acc)
        for k, loop in enumerate(table):
            if count[k] != loop.extent - 1:
                count[k] += 1
                for j in range(k):
                    count[j] = 0
                acc = [a + c for a, c in zip(acc, loop.carries, strict=True)]
                break
        else:
            return


def simulate_program(prog: ConverterProgram, src_image):
    """Run ``prog`` the way the hardware does on a source image; return the destination image.

    Used to test the compiler against ``descriptor.execute`` without a simulator.
    """
    import numpy as np

    dst = np.zeros((prog.dst_groups, prog.dst_lw_per_group), dtype=np.uint64)
    buf = [0] * prog.half_lw
    for base in engine_bases(prog):  # engines write disjoint Groups: one after another here
        _simulate_engine(prog, src_image, base, buf, dst)
    return dst


def _simulate_engine(prog: ConverterProgram, src_image, base: tuple[int, ...], buf: list,
                     dst) -> None:
    """One engine's blocks: the outer table walked from ``base``."""
    lanes = prog.lanes_per_lw
    w = prog.elem_bits
    mask = (1 << w) - 1
    last_slot = (-1, -1)
    for rel in walk_table(prog.outer, 5 + MAX_AXES):
        ob = tuple(b + r for b, r in zip(base, rel, strict=True))
        sg, sa, sl, dg, da = ob[:5]
        olog = ob[5:]
        idx = 0
        for rd in walk_table(prog.read, 2):
            g, a = sg + rd[0], sa + rd[1]
            for beat in range(prog.burst):
                if g < prog.src_groups and a + beat < prog.src_lw_per_group:
                    buf[idx] = int(src_image[g, a + beat])
                idx += 1
        for ga in walk_table(prog.gather, 2 + MAX_AXES):
            word = 0
            used = False
            for lane, entry in enumerate(prog.lanes[:lanes]):
                e = sl + ga[0] + entry.elem
                ok = entry.valid and all(
                    ob[5 + ax] + ga[2 + ax] + entry.log[ax] < prog.dims[ax]
                    for ax in range(MAX_AXES))
                if ok:
                    used = True
                    value = (buf[(e // lanes) % prog.half_lw] >> (w * (e % lanes))) & mask
                    word |= value << (w * lane)
            if used:
                slot = (dg, da + ga[1])
                if slot <= last_slot:
                    raise ProgramError(f"Destination LW {slot} written out of order")
                last_slot = slot
                dst[slot] = word
        del olog
