"""Proof harness of one bank machine with its timers: the per-bank rules, closed by k-induction."""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, ResetSignal, Signal

from ..arch import ArchConfig
from ..contracts.memctrl import Cmd
from ..memctrl.bankmachine import BankMachine
from ..memctrl.properties import CommandRules
from .memctrl import PROOF_CONFIG
from .primitives import AnySeq, Assert, Assume

__all__ = ["BankProof"]


class BankProof(Elaboratable):
    """A :class:`BankMachine` driven by a free scheduler that obeys only the bank's ``*_ready``.

    Each cycle the free scheduler may issue ACT (any row), PRE, RD or WR (any length 1 ..
    burst length) to the bank when the bank says the command is legal, and a column only
    when the data bus is free; a small data-bus model (the data engine's timing: beat ``k``
    of a burst issued in cycle ``c`` in cycle ``c + 1 + k``) drives ``wbeat`` and
    ``data_busy``. Asserted: the per-bank rules of :class:`CommandRules` (tRCD, tRP, tRAS,
    tWR, tRTP, ACT only when closed, PRE only when open, a column only to the open row, no PRE
    under a read burst), and, as induction invariants, that the monitor's row state is the
    bank machine's.

    Parameters
    ----------
    config : ArchConfig
        Timing of the bank (its first bank is the one under proof).
    rules : ArchConfig or None
        The timing the commands are checked against (default ``config``; a mutant differs).
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG, rules: ArchConfig | None = None):
        self.config = config
        self.rules = config if rules is None else rules

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bl = cfg.timing.burst_length
        m.submodules.bank = bm = BankMachine(cfg)
        m.submodules.rules = rules = CommandRules(self.rules, bank_only=True)
        st = bm.state
        kind = Signal(3)
        length = Signal(range(bl + 1))
        m.d.comb += [Assume(~ResetSignal()), kind.eq(AnySeq(3)), length.eq(AnySeq(length.shape())),
                     bm.act_row.eq(AnySeq(len(bm.act_row)))]

        # -- the data bus: one burst at a time, beats after the command -------------------------
        rem = Signal(range(bl + 1))
        writing = Signal()
        free = (rem == 0) | (rem == 1)
        act, pre = kind == Cmd.ACT, kind == Cmd.PRE
        rd, wr = kind == Cmd.RD, kind == Cmd.WR
        col = rd | wr
        m.d.comb += [
            Assume((kind == Cmd.NONE) | act | pre | col),
            Assume(~act | st.act_ready),
            Assume(~pre | st.pre_ready),
            Assume(~col | (st.col_ready & free & (length >= 1) & (length <= bl))),
        ]
        with m.If(rem != 0):
            m.d.sync += rem.eq(rem - 1)
        with m.If(col):
            m.d.sync += [rem.eq(length), writing.eq(wr)]
        m.d.comb += [
            bm.act.eq(act), bm.pre.eq(pre), bm.col.eq(col), bm.col_write.eq(wr),
            bm.wbeat.eq((rem != 0) & writing),
            bm.data_busy.eq(rem != 0),
        ]

        # -- the command stream under the per-bank rules ----------------------------------------
        m.d.comb += [
            rules.cmd_valid.eq(kind != Cmd.NONE),
            rules.cmd_kind.eq(kind),
            rules.cmd_bank.eq(0),
            rules.cmd_row.eq(bm.act_row),
            rules.cmd_len.eq(length),
        ]
        with m.If(col):
            m.d.comb += rules.cmd_row.eq(st.open_row)

        # -- induction invariants: the monitor's row state is the bank's --------------------------
        m.d.comb += [
            Assert(rules.bank_open[0] == st.is_open, "monitor and bank disagree on open"),
            Assert(~st.is_open | (rules.bank_row[0] == st.open_row),
                   "monitor and bank disagree on the row"),
        ]
        return m
