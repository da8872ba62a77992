"""One DRAM bank: open-row state and the per-bank timing rules (tRCD, tRP, tRAS, tWR)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .timers import TimingCounter

__all__ = ["BankMachine", "row_bits"]


def row_bits(config: ArchConfig) -> int:
    """Bits of a row number inside the simulated window (plus the spare range bit)."""
    from .port import addr_bits
    return max(1, addr_bits(config) + 1 - config.col_bits - config.bank_bits)


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
    is_open, open_row : Signal, out
        A row is open, and which.
    fresh : Signal, out
        The open row has not yet served a column command (its first column is a row miss).
    act_ready, pre_ready, col_ready : Signal, out
        The command is legal this cycle.
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
            "is_open": Out(1),
            "open_row": Out(rb),
            "fresh": Out(1),
            "act_ready": Out(1),
            "pre_ready": Out(1),
            "col_ready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.config.timing

        # -- timing rules ---------------------------------------------------------------
        m.submodules.trcd = trcd = TimingCounter(t.trcd, "trcd")
        m.submodules.trp = trp = TimingCounter(t.trp, "trp")
        m.submodules.tras = tras = TimingCounter(t.tras, "tras")
        m.submodules.twr = twr = TimingCounter(t.twr, "twr")
        m.d.comb += [
            trcd.trigger.eq(self.act),
            tras.trigger.eq(self.act),
            trp.trigger.eq(self.pre),
            twr.trigger.eq((self.col & self.col_write) | self.wbeat),
        ]

        # -- row state ------------------------------------------------------------------
        with m.If(self.act):
            m.d.sync += [
                self.is_open.eq(1),
                self.open_row.eq(self.act_row),
                self.fresh.eq(1),
            ]
        with m.Elif(self.pre):
            m.d.sync += self.is_open.eq(0)
        with m.Elif(self.col):
            m.d.sync += self.fresh.eq(0)

        m.d.comb += [
            self.act_ready.eq(~self.is_open & trp.ready),
            self.pre_ready.eq(self.is_open & tras.ready & twr.ready & ~self.data_busy),
            self.col_ready.eq(self.is_open & trcd.ready),
        ]
        return m
