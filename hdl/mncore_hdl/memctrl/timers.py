"""Small named down-counters of the DRAM timing rules, each exposing ``ready``: one per rule
(:class:`TimingCounter`), or one for several rules (:class:`SharedTimer`)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SharedTimer", "TimingCounter"]


def _check_rule(cycles: object, name: object) -> None:
    """A rule's distance is a positive integer and its name a string."""
    if isinstance(cycles, bool) or not isinstance(cycles, int):
        raise TypeError(f"Cycle count must be an integer, not {cycles!r}")
    if cycles <= 0:
        raise ValueError(f"Cycle count must be a positive integer, not {cycles}")
    if not isinstance(name, str):
        raise TypeError(f"Rule name must be a string, not {name!r}")


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
        _check_rule(cycles, name)
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


class SharedTimer(wiring.Component):
    """Several rules "event B at least ``cycles`` after event A" sharing one down-counter.

    Each rule has its own trigger (event A); ``ready`` says every rule is met, as the AND of
    one :class:`TimingCounter` per rule would, with one counter instead of several: a cycle
    model (Verilator) evaluates every counter every cycle, so fewer counters run faster.

    * ``overlap=True``: the counter holds the longest wait still running. A trigger raises it
      to its rule's ``cycles - 1`` and never lowers it. This is exact: a rule's own counter
      never exceeds ``cycles - 1``, so restarting it only ever matters when it becomes the
      longest.
    * ``overlap=False``: a trigger loads its rule's ``cycles - 1``, whatever runs. This is the
      AND of the rules' counters only when no rule's wait matters after another rule's
      trigger (the bank's tRCD after an ACT and tRP after a PRE: each is read only in the row
      state its own trigger enters).

    Parameters
    ----------
    rules : dict of str to int
        Each rule's name and minimum distance in cycles (positive).
    name : str
        The counter's name, for waveforms.
    overlap : bool
        The rules' waits overlap (see above).

    Attributes
    ----------
    ``<rule>`` : Signal, in
        Each rule's event A happened this cycle (at most one with ``overlap=False``).
    ready : Signal, out
        Every rule is met this cycle.
    """

    def __init__(self, rules: dict[str, int], name: str, overlap: bool = True):
        for rule, cycles in rules.items():
            _check_rule(cycles, rule)
        if not rules:
            raise ValueError("A shared timer needs at least one rule, not none")
        self.rules = dict(rules)
        self.name = name
        self.overlap = overlap
        super().__init__({**{rule: In(1) for rule in rules}, "ready": Out(1)})

    def elaborate(self, platform):
        m = Module()
        longest = max(self.rules.values())
        if longest == 1:
            m.d.comb += self.ready.eq(1)
            return m
        count = Signal(range(longest), name=f"{self.name}_count")
        down = Signal.like(count, name=f"{self.name}_down")
        m.d.comb += [down.eq(count - (count != 0)), self.ready.eq(count == 0)]
        m.d.sync += count.eq(down)
        # shortest first, so that a longer triggered rule's load wins
        for rule, cycles in sorted(self.rules.items(), key=lambda kv: kv[1]):
            trigger = getattr(self, rule)
            if self.overlap:
                if cycles == 1:
                    continue   # a wait of 0 never raises the longest
                trigger = trigger & (down < cycles - 1)
            with m.If(trigger):
                m.d.sync += count.eq(cycles - 1)
        return m
