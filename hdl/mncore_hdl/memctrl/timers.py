"""Small named down-counters, one per DRAM timing rule, each exposing ``ready``."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TimingCounter"]


class TimingCounter(wiring.Component):
    """Enforce "event B at least ``cycles`` cycles after event A".

    Pulse ``trigger`` on the cycle event A happens; ``ready`` is low from the next cycle until
    ``cycles`` cycles after the (last) trigger, then high again. A new trigger restarts the
    count, so the rule is measured from the latest event A. ``ready`` is high after reset.

    Parameters
    ----------
    cycles : int
        The rule's minimum distance in cycles (positive).
    name : str
        The rule's name (``"trcd"``, ...), for reports and waveforms.

    Attributes
    ----------
    trigger : Signal, in
        Event A happened this cycle.
    ready : Signal, out
        Event B may happen this cycle.
    """

    def __init__(self, cycles: int, name: str = "rule"):
        if isinstance(cycles, bool) or not isinstance(cycles, int):
            raise TypeError(f"Cycle count must be an integer, not {cycles!r}")
        if cycles <= 0:
            raise ValueError(f"Cycle count must be a positive integer, not {cycles}")
        if not isinstance(name, str):
            raise TypeError(f"Rule name must be a string, not {name!r}")
        self.cycles = cycles
        self.name = name
        super().__init__({"trigger": In(1), "ready": Out(1)})

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self.cycles), name=f"{self.name}_count")
        with m.If(self.trigger):
            m.d.sync += count.eq(self.cycles - 1)
        with m.Elif(count != 0):
            m.d.sync += count.eq(count - 1)
        # ready is high in the cycle the counter has run down, and stays high while idle;
        # with cycles == 1 the rule only forbids the trigger cycle itself.
        if self.cycles == 1:
            m.d.comb += self.ready.eq(1)
        else:
            m.d.comb += self.ready.eq(count == 0)
        return m
