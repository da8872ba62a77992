"""Periodic refresh: ask for a REF every tREFI cycles and time tRFC after it."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .timers import TimingCounter

__all__ = ["Refresher"]


class Refresher(wiring.Component):
    """Refresh request generator.

    A free-running interval counter raises ``want`` every ``trefi`` cycles (counted from reset,
    not from the last REF, so postponing one refresh never shifts the next: the average interval
    is exactly tREFI). While ``want`` is high the scheduler issues no new work, precharges the
    open banks and then issues REF (``issue``), which clears ``want`` and starts tRFC.

    Attributes
    ----------
    issue : Signal, in
        The scheduler issues REF this cycle.
    want : Signal, out
        A refresh is due; requests must wait.
    trfc_ready : Signal, out
        No refresh is in progress (tRFC has elapsed since the last REF).
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        super().__init__({"issue": In(1), "want": Out(1), "trfc_ready": Out(1)})
        # state exposed for the proofs' invariants (formal/memctrl.py)
        self.interval = Signal(range(config.timing.trefi), name="trefi_count")

    def elaborate(self, platform):
        m = Module()
        t = self.config.timing

        # -- interval ---------------------------------------------------------------------
        interval = self.interval
        due = Signal()
        m.d.comb += due.eq(interval == t.trefi - 1)
        with m.If(due):
            m.d.sync += interval.eq(0)
        with m.Else():
            m.d.sync += interval.eq(interval + 1)

        with m.If(due):
            m.d.sync += self.want.eq(1)
        with m.Elif(self.issue):
            m.d.sync += self.want.eq(0)

        # -- refresh duration -----------------------------------------------------------------
        m.submodules.trfc = trfc = TimingCounter(t.trfc, "trfc")
        m.d.comb += [
            trfc.trigger.eq(self.issue),
            self.trfc_ready.eq(trfc.ready),
        ]
        return m
