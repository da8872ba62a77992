"""A loop-nest walker: counters with programmable extents that add one signed carry per step."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contracts.converter import ACC_BITS, EXTENT_BITS

__all__ = ["LoopWalker", "ACC_BITS", "EXTENT_BITS"]


class LoopWalker(wiring.Component):
    """Walk a nest of up to ``loops`` counters (index 0 innermost), ``n`` of them active.

    ``restart`` clears the counters and accumulators; ``advance`` steps the innermost counter
    (with carries into outer ones) and adds the carry of the counter that moved to every
    accumulator. ``last`` is high while the walk stands on its final step.

    Parameters
    ----------
    loops : int
        Counters in the table.
    quantities : int
        Accumulators.

    Attributes
    ----------
    n : Signal(range(loops + 1)), in
        Active loops (the rest count as extent 1).
    extent : Signal array, in
        Extent of each loop.
    carry : Signal array [loop][quantity], in
        What one step of each loop adds to each accumulator.
    acc : Signal array [quantity], out
        The accumulators at the current step.
    count : list of Signal
        Each loop's counter (state, not a port): read by the formal proofs' invariants.
    """

    def __init__(self, loops: int, quantities: int):
        for name, value in (("Loop count", loops), ("Quantity count", quantities)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, not {value!r}")
            if value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value}")
        self.loops = loops
        self.quantities = quantities
        self.count = [Signal(unsigned(EXTENT_BITS), name=f"count{k}") for k in range(loops)]
        super().__init__({
            "n": In(range(loops + 1)),
            "extent": In(unsigned(EXTENT_BITS)).array(loops),
            "carry": In(signed(ACC_BITS)).array(loops, quantities),
            "restart": In(1),
            "advance": In(1),
            "last": Out(1),
            "acc": Out(signed(ACC_BITS)).array(quantities),
        })

    def elaborate(self, platform):
        m = Module()
        count = self.count
        at_end = [Signal(name=f"at_end{k}") for k in range(self.loops)]
        for k in range(self.loops):
            m.d.comb += at_end[k].eq((k >= self.n) | (count[k] + 1 >= self.extent[k]))
        m.d.comb += self.last.eq(sum_all(at_end))

        with m.If(self.restart):
            m.d.sync += [c.eq(0) for c in count]
            m.d.sync += [a.eq(0) for a in self.acc]
        with m.Elif(self.advance & ~self.last):
            # The innermost counter not at its end moves; the ones inside it wrap to zero.
            for k in reversed(range(self.loops)):
                moves = ~at_end[k]
                for j in range(k):
                    moves = moves & at_end[j]
                with m.If(moves):
                    m.d.sync += count[k].eq(count[k] + 1)
                    m.d.sync += [count[j].eq(0) for j in range(k)]
                    m.d.sync += [self.acc[q].eq(self.acc[q] + self.carry[k][q])
                                 for q in range(self.quantities)]
        return m


def sum_all(bits):
    """AND of a list of 1-bit values."""
    out = bits[0]
    for b in bits[1:]:
        out = out & b
    return out
