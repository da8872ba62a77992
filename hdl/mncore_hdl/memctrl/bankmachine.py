"""One DRAM bank: open-row state and the per-bank timing rules (tRCD, tRP, tRAS, tWR, tRTP)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import BankStateSignature, row_bits
from .timers import TimingCounter

__all__ = ["BankMachine"]


class BankMachine(wiring.Component):
    """Row state of one bank, driven by the scheduler's commands.

    The scheduler decides; the bank machine only remembers and times. Each command input is a
    one-cycle strobe; at most one of ``act``, ``pre``, ``col`` is high in a cycle.

    Parameters
    ----------
    config : ArchConfig
        Timing rules and geometry.

    Attributes
    ----------
    act, pre, col : Signal, in
        Activate ``act_row`` / precharge / column command (read or write) this cycle.
    col_write : Signal, in
        With ``col``: the column command is a write.
    wbeat : Signal, in
        A write data beat lands in this bank this cycle (restarts tWR).
    data_busy : Signal, in
        The data engine is still moving a burst of this bank (no precharge under it).
    state : Out(BankStateSignature)
        What the scheduler sees: ``is_open`` and ``open_row`` (a row is open, and which), and
        ``act_ready``, ``pre_ready``, ``col_ready`` (the command is legal this cycle).
    fresh : Signal, out
        The open row has not yet served a column command (its first column is a row miss).
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        rb = row_bits(config)
        super().__init__({
            "act": In(1),
            "act_row": In(rb),
            "pre": In(1),
            "col": In(1),
            "col_write": In(1),
            "wbeat": In(1),
            "data_busy": In(1),
            "state": Out(BankStateSignature(config)),
            "fresh": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.config.timing

        # -- timing rules ---------------------------------------------------------------
        m.submodules.trcd = trcd = TimingCounter(t.trcd, "trcd")
        m.submodules.trp = trp = TimingCounter(t.trp, "trp")
        m.submodules.tras = tras = TimingCounter(t.tras, "tras")
        m.submodules.twr = twr = TimingCounter(t.twr, "twr")
        m.submodules.trtp = trtp = TimingCounter(t.trtp, "trtp")
        m.d.comb += [
            trcd.trigger.eq(self.act),
            tras.trigger.eq(self.act),
            trp.trigger.eq(self.pre),
            twr.trigger.eq((self.col & self.col_write) | self.wbeat),
            trtp.trigger.eq(self.col & ~self.col_write),
        ]

        # -- row state ------------------------------------------------------------------
        state = self.state
        with m.If(self.act):
            m.d.sync += [
                state.is_open.eq(1),
                state.open_row.eq(self.act_row),
                self.fresh.eq(1),
            ]
        with m.Elif(self.pre):
            m.d.sync += state.is_open.eq(0)
        with m.Elif(self.col):
            m.d.sync += self.fresh.eq(0)

        m.d.comb += [
            state.act_ready.eq(~state.is_open & trp.ready),
            state.pre_ready.eq(state.is_open & tras.ready & twr.ready & trtp.ready
                              & ~self.data_busy),
            state.col_ready.eq(state.is_open & trcd.ready),
        ]
        return m
