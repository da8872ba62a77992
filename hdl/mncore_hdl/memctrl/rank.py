"""Rules between banks and on the data bus: tRRD, tFAW, tCCD and the read/write turnarounds."""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .timers import TimingCounter

__all__ = ["RankTiming"]

#: ACTs the four-activate window counts.
FAW_ACTS = 4


class RankTiming(wiring.Component):
    """The timing rules every bank shares, each a named :class:`~.timers.TimingCounter`.

    The scheduler decides; this block only times. ``act_ready`` says an ACT to any bank may
    issue this cycle (tRRD since the last ACT, and tFAW since the fourth-last: the counters
    ``faw0`` .. ``faw3`` take the ACTs in turn, so the next ACT waits for the counter of the
    ACT four before it). ``rd_ready`` and ``wr_ready`` say a column command of that direction
    may issue (tCCD since the last column command; tWTR since the last write beat before a
    read, tRTW idle bus cycles after the last read beat before a write). A turnaround of 0
    cycles is no rule at all.

    Parameters
    ----------
    config : ArchConfig
        The timing rules (``config.timing``).

    Attributes
    ----------
    act, col, col_write : Signal, in
        An ACT / a column command (a write with ``col_write``) issues this cycle.
    rbeat, wbeat : Signal, in
        A read / write beat is on the data bus this cycle.
    act_ready, rd_ready, wr_ready : Signal, out
        The command may issue this cycle.
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        super().__init__({
            "act": In(1),
            "col": In(1),
            "col_write": In(1),
            "rbeat": In(1),
            "wbeat": In(1),
            "act_ready": Out(1),
            "rd_ready": Out(1),
            "wr_ready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.config.timing

        # -- activates: tRRD and the four-activate window ----------------------------------
        m.submodules.trrd = trrd = TimingCounter(t.trrd, "trrd")
        m.d.comb += trrd.trigger.eq(self.act)
        fawk = []
        for k in range(FAW_ACTS):
            c = TimingCounter(t.tfaw, f"faw{k}")
            m.submodules[f"faw{k}"] = c
            fawk.append(c)
        slot = Signal(range(FAW_ACTS), name="faw_slot")
        for k, c in enumerate(fawk):
            m.d.comb += c.trigger.eq(self.act & (slot == k))
        with m.If(self.act):
            m.d.sync += slot.eq(slot + 1)
        faw_ready = Array(c.ready for c in fawk)[slot]
        m.d.comb += self.act_ready.eq(trrd.ready & faw_ready)

        # -- column commands: tCCD and the turnarounds --------------------------------------
        m.submodules.tccd = tccd = TimingCounter(t.tccd, "tccd")
        m.d.comb += tccd.trigger.eq(self.col)
        rd_turn = self._turnaround(m, "twtr", t.twtr, (self.col & self.col_write) | self.wbeat,
                                   self.wbeat)
        wr_turn = self._turnaround(m, "trtw", t.trtw, (self.col & ~self.col_write) | self.rbeat,
                                   self.rbeat)
        m.d.comb += [
            self.rd_ready.eq(tccd.ready & rd_turn),
            self.wr_ready.eq(tccd.ready & wr_turn),
        ]
        return m

    @staticmethod
    def _turnaround(m, name, cycles, trigger, beat_now):
        """Ready ``cycles`` cycles after the last ``trigger``, never while ``beat_now``.

        The opposite direction's command in the cycle of its last beat would be 0 cycles
        after it; a counter is still running then only when ``cycles >= 2``, hence the
        explicit ``beat_now`` term.
        """
        if cycles == 0:
            return Const(1)
        counter = TimingCounter(cycles, name)
        m.submodules[name] = counter
        m.d.comb += counter.trigger.eq(trigger)
        return counter.ready & ~beat_now
