"""Round-robin arbiter: picks which requester port gets the next column command."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobin"]


class RoundRobin(wiring.Component):
    """Fair round-robin choice among ``count`` requesters.

    Each cycle ``grant`` names the first requester with its ``requests`` bit set, searching
    from the one after the last served requester (the last served one comes last). ``advance``
    tells the arbiter the granted requester was served; priority then moves past it. A requester
    that keeps its request up is served after at most ``count - 1`` others: no starvation.

    Parameters
    ----------
    count : int
        Number of requesters (positive).

    Attributes
    ----------
    requests : Signal(count), in
        Requester ``i`` wants service.
    advance : Signal, in
        The granted requester is served this cycle.
    grant : Signal(range(count)), out
        The chosen requester (meaningful when ``valid``).
    valid : Signal, out
        Some requester is asking.
    """

    def __init__(self, count: int):
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"Requester count must be an integer, not {count!r}")
        if count <= 0:
            raise ValueError(f"Requester count must be a positive integer, not {count}")
        self.count = count
        # state exposed for the proofs' invariants (formal/arbiter.py)
        self.last = Signal(range(count), init=count - 1, name="last")
        super().__init__({
            "requests": In(count),
            "advance": In(1),
            "grant": Out(range(count)),
            "valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.count
        last = self.last
        m.d.comb += self.valid.eq(self.requests.any())

        # For each possible "last", a priority chain from last+1 round to last; the highest
        # priority wins, so assign candidates in reverse order of preference.
        with m.Switch(last):
            for lv in range(n):
                with m.Case(lv):
                    order = [(lv + 1 + k) % n for k in range(n)]
                    for i in reversed(order):
                        with m.If(self.requests[i]):
                            m.d.comb += self.grant.eq(i)

        with m.If(self.advance & self.valid):
            m.d.sync += last.eq(self.grant)
        return m
