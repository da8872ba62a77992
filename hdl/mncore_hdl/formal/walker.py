"""Proof harness of the converter's loop walker: each address of the buffer exactly once."""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Module, Mux, ResetSignal, Signal, signed

from ..converter.walker import ACC_BITS, LoopWalker
from .primitives import AnyConst, Assert, Assume

__all__ = ["MAX_EXTENT", "WalkerProof"]

#: Largest extent of each of the two loops in the proof's descriptor space.
MAX_EXTENT = 4


class WalkerProof(Elaboratable):
    """A two-loop walk over a dense buffer of ``e0 x e1`` LWs, in either loop order.

    The extents ``e0, e1`` (1 .. :data:`MAX_EXTENT`) and the order (row-major, or the
    transpose: strides ``(1, e0)`` or ``(e1, 1)``) are symbolic constants; the carries are
    what the converter's program builder derives from the strides (``stride_k`` minus the
    inner loops' wrap-around). ``advance`` is high every cycle of the walk (a stall only
    holds the walker's state, and a free ``advance`` multiplies the depth the proof needs).
    Asserted: every address the walk visits lies in ``[0, e0 * e1)`` and was not visited
    before, and when the walk ends every address of the buffer was visited: each address
    exactly once, nothing outside (for the source walk, the same statement says it reads only
    inside the source buffer).

    The auxiliary invariants that make k-induction close (:meth:`_invariants`) tie the walker's
    own counters to the address and the visited bitmap: the counters stay inside the extents,
    the address is ``count0 * s0 + count1 * s1``, and an address is marked visited exactly
    when its step comes before the current one (or the walk has finished).

    Parameters
    ----------
    walker : callable
        Builds the walker under proof from ``(loops, quantities)`` (a mutant test passes a
        broken one); default :class:`~mncore_hdl.converter.walker.LoopWalker`.
    """

    def __init__(self, walker=LoopWalker):
        self.walker = walker

    def elaborate(self, platform):
        m = Module()
        m.submodules.walk = walk = self.walker(2, 1)
        size = MAX_EXTENT * MAX_EXTENT
        e0 = Signal(range(MAX_EXTENT + 1))
        e1 = Signal(range(MAX_EXTENT + 1))
        transposed = Signal()
        m.d.comb += [e0.eq(AnyConst(e0.shape())), e1.eq(AnyConst(e1.shape())),
                     transposed.eq(AnyConst(1))]
        m.d.comb += [Assume(~ResetSignal()),
                     Assume((e0 >= 1) & (e0 <= MAX_EXTENT)),
                     Assume((e1 >= 1) & (e1 <= MAX_EXTENT))]
        # Strides and carries are signed: the transposed walk's outer carry is negative.
        s0 = Signal(signed(ACC_BITS))
        s1 = Signal(signed(ACC_BITS))
        m.d.comb += [s0.eq(Mux(transposed, e1, 1)), s1.eq(Mux(transposed, 1, e0))]
        started = Signal()
        finished = Signal()
        m.d.sync += started.eq(1)
        advance = Signal()
        m.d.comb += [
            advance.eq(started & ~finished),
            walk.n.eq(2),
            walk.extent[0].eq(e0),
            walk.extent[1].eq(e1),
            walk.carry[0][0].eq(s0),
            walk.carry[1][0].eq(s1 - (e0 - 1).as_signed() * s0),
            walk.restart.eq(~started),
            walk.advance.eq(advance),
        ]
        with m.If(advance & walk.last):
            m.d.sync += finished.eq(1)

        # -- each visit: inside the buffer, first time; at the end: all of it ----------------
        visited = Signal(size)
        addr = walk.acc[0]
        with m.If(advance):
            m.d.sync += visited.bit_select(addr[:4], 1).eq(1)
            m.d.comb += [
                Assert((addr >= 0) & (addr < e0 * e1), "walk leaves the buffer"),
                Assert(~visited.bit_select(addr[:4], 1), "walk visits an address twice"),
            ]
        for a in range(size):
            m.d.comb += Assert(~finished | (a >= e0 * e1) | visited[a],
                               f"walk ended without visiting address {a}")
        self._invariants(m, walk, (e0, e1), (s0, s1), started, finished, visited)
        return m

    @staticmethod
    def _invariants(m, walk, extents, strides, started, finished, visited):
        """State invariants (true of every reachable state) for the induction step."""
        e0, e1 = extents
        s0, s1 = strides
        c0, c1 = walk.count[0], walk.count[1]
        step = c1 * e0 + c0
        m.d.comb += [
            Assert((c0 < e0) & (c1 < e1), "walker counter outside its extent"),
            Assert(walk.acc[0] == c0 * s0 + c1 * s1, "walker address is not its counters'"),
            Assert(started | ((c0 == 0) & (c1 == 0) & (visited == 0) & ~finished),
                   "walk state before the start"),
            Assert(~finished | ((c0 == e0 - 1) & (c1 == e1 - 1)), "walk finished early"),
        ]
        for a in range(len(visited)):
            before = []
            for i1 in range(MAX_EXTENT):
                for i0 in range(MAX_EXTENT):
                    before.append((i0 < e0) & (i1 < e1) & (i0 * s0 + i1 * s1 == a)
                                  & (finished | (i1 * e0 + i0 < step)))
            m.d.comb += Assert(visited[a] == Cat(*before).any(),
                               f"visited bit {a} disagrees with the walk's step")
