"""One DRAM bank: open-row state and the per-bank timing rules (tRCD, tRP, tRAS, tWR, tRTP)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import BankStateSignature, row_bits
from .timers import SharedTimer

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

        # -- timing rules: two shared counters instead of one per rule ------------------
        # tRCD (ACT to column) is read only while the row is open, tRP (PRE to ACT) only
        # while it is closed: one counter, loaded by the command that enters the state.
        m.submodules.row_wait = row = SharedTimer({"trcd": t.trcd, "trp": t.trp}, "row_wait",
                                                  overlap=False)
        # tRAS, tWR and tRTP all gate the PRE: one counter holds the longest still running.
        m.submodules.pre_wait = pre = SharedTimer({"tras": t.tras, "twr": t.twr,
                                                   "trtp": t.trtp}, "pre_wait")
        m.d.comb += [
            row.trcd.eq(self.act),
            row.trp.eq(self.pre),
            pre.tras.eq(self.act),
            pre.twr.eq((self.col & self.col_write) | self.wbeat),
            pre.trtp.eq(self.col & ~self.col_write),
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
            state.act_ready.eq(~state.is_open & row.ready),
            state.pre_ready.eq(state.is_open & pre.ready & ~self.data_busy),
            state.col_ready.eq(state.is_open & row.ready),
        ]
        return m
