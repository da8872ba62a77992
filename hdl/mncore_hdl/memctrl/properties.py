"""Formal properties of the DRAM command stream: every timing rule, as ``Assert`` statements."""

from __future__ import annotations

from amaranth.hdl import Assert, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ..arch import ArchConfig
from ..contracts.memctrl import Cmd
from .rank import FAW_ACTS
from .signatures import row_bits

__all__ = ["CommandRules"]


class CommandRules(wiring.Component):
    """Assert that the observed command stream keeps every rule of ``config.timing``.

    The formal twin of :class:`mncore_hdl.testing.memctrl_model.TimingChecker`, on the
    controller's observation port (``cmd_valid``, ``cmd_kind``, ...): the same rules with the
    same meaning of time (a column burst of ``n`` beats issued in cycle ``c`` moves data in
    cycles ``c+1 .. c+n``). Each rule keeps the age of its event A (cycles since it, saturating),
    and asserts ``age >= rule`` on the cycle event B issues. Refresh: REF only with every bank
    closed and tRP met since each bank's PRE, nothing during tRFC, and never more than one
    refresh owed (a REF for every tREFI interval, postponed by at most one interval).

    Parameters
    ----------
    config : ArchConfig
        The rules the stream must keep (a proof may give the controller a different one: the
        mutant tests do).
    bank_only : bool
        Check only the per-bank rules (a proof of one bank machine, which enforces no rule
        between banks and no refresh).

    Attributes
    ----------
    bank_open, bank_row : list of Signal
        The monitor's view of each bank's row state, for a proof's invariants.
    refi_count, refresh_owed : Signal
        The monitor's tREFI interval (cycles since the last refresh fell due) and the
        refreshes owed, for a proof's invariants.

    Each age also carries its range as an assertion (``1 - burst_length .. saturation``):
    true of every reachable state, it is what lets k-induction start from a sane monitor.
    """

    def __init__(self, config: ArchConfig, bank_only: bool = False):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        self.bank_only = bank_only
        self.bank_open = [Signal(name=f"bank{b}_open") for b in range(config.banks)]
        self.bank_row = [Signal(row_bits(config), name=f"bank{b}_row")
                         for b in range(config.banks)]
        self.refi_count = Signal(range(config.timing.trefi), name="refi_count")
        self.refresh_owed = Signal(range(4), name="refresh_owed")
        super().__init__({
            "cmd_valid": In(1),
            "cmd_kind": In(3),
            "cmd_bank": In(max(1, config.bank_bits)),
            "cmd_row": In(row_bits(config)),
            "cmd_len": In(range(config.timing.burst_length + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.config.timing
        self._sat = max(t.trcd, t.trp, t.tras, t.twr, t.trfc, t.trrd, t.tfaw, t.twtr,
                        t.trtp, t.trtw, t.tccd) + 2
        self._bits = (self._sat + t.burst_length).bit_length() + 1
        kind = Signal(3)
        m.d.comb += kind.eq(self.cmd_kind & self.cmd_valid.replicate(3))
        is_ = {c: Signal(name=f"is_{c.name.lower()}") for c in Cmd if c != Cmd.NONE}
        for c, s in is_.items():
            m.d.comb += s.eq(kind == c)
        act, pre, rd, wr, ref = (is_[Cmd.ACT], is_[Cmd.PRE], is_[Cmd.RD], is_[Cmd.WR],
                                 is_[Cmd.REF])
        col = rd | wr
        end = 1 - self.cmd_len   # cycle - (c + len), one cycle after the command

        # -- per-bank rules -------------------------------------------------------------------
        for b in range(self.config.banks):
            self._bank(m, b, act, pre, rd, wr, ref, end)
        if self.bank_only:
            return m

        # -- rules between banks and on the data bus ------------------------------------------
        ref_age = self._age(m, "ref", ref)
        acts = self._window(m, act)
        col_age = self._age(m, "col_any", col)
        wr_end_any = self._age(m, "wr_end_any", wr, end)
        rd_end_any = self._age(m, "rd_end_any", rd, end)
        bus_end = self._age(m, "bus_end", col, end)
        m.d.comb += [
            Assert(~(kind != 0) | ref | (ref_age >= t.trfc), "command during tRFC"),
            Assert(~ref | (ref_age >= t.trfc), "REF violates tRFC"),
            Assert(~act | (acts[-1] >= t.trrd), "ACT violates tRRD"),
            Assert(~act | (acts[0] >= t.tfaw), "ACT violates tFAW"),
            Assert(~col | (col_age >= t.tccd), "column violates tCCD"),
            Assert(~col | (bus_end >= 0), "column while the data bus is busy"),
            Assert(~col | ((self.cmd_len >= 1) & (self.cmd_len <= t.burst_length)),
                   "column length outside 1 .. burst length"),
        ]
        if t.twtr:
            m.d.comb += Assert(~rd | (wr_end_any >= t.twtr), "RD violates tWTR")
        if t.trtw:
            m.d.comb += Assert(~wr | (rd_end_any >= t.trtw), "WR violates tRTW")
        self._refresh_interval(m, ref)
        return m

    def _bank(self, m, b, act, pre, rd, wr, ref, end):
        """Row state of bank ``b`` and its rules: tRCD, tRP, tRAS, tWR, tRTP, REF when closed."""
        t = self.config.timing
        here = self.cmd_bank == b
        is_open = self.bank_open[b]
        row = self.bank_row[b]
        with m.If(act & here):
            m.d.sync += [is_open.eq(1), row.eq(self.cmd_row)]
        with m.Elif((pre & here) | ref):
            m.d.sync += is_open.eq(0)
        act_age = self._age(m, f"act{b}", act & here)
        pre_age = self._age(m, f"pre{b}", pre & here)
        rd_age = self._age(m, f"rd{b}", rd & here)
        wr_end = self._age(m, f"wr_end{b}", wr & here, end)
        rd_end = self._age(m, f"rd_end{b}", rd & here, end)
        col = (rd | wr) & here
        m.d.comb += [
            Assert(~(act & here) | ~is_open, f"ACT bank {b} while open"),
            Assert(~(act & here) | (pre_age >= t.trp), f"ACT bank {b} violates tRP"),
            Assert(~(pre & here) | is_open, f"PRE bank {b} while closed"),
            Assert(~(pre & here) | (act_age >= t.tras), f"PRE bank {b} violates tRAS"),
            Assert(~(pre & here) | (wr_end >= t.twr), f"PRE bank {b} violates tWR"),
            Assert(~(pre & here) | (rd_end >= 1), f"PRE bank {b} under its read burst"),
            Assert(~(pre & here) | (rd_age >= t.trtp), f"PRE bank {b} violates tRTP"),
            Assert(~col | (is_open & (row == self.cmd_row)), f"column bank {b} off its row"),
            Assert(~col | (act_age >= t.trcd), f"column bank {b} violates tRCD"),
            Assert(~ref | ~is_open, f"REF with bank {b} open"),
            Assert(~ref | (pre_age >= t.trp), f"REF violates tRP of bank {b}"),
        ]

    def _refresh_interval(self, m, ref):
        """A refresh falls due every tREFI cycles from reset; at most one may be owed."""
        t = self.config.timing
        interval = self.refi_count
        due = interval == t.trefi - 1
        m.d.sync += interval.eq(0)
        with m.If(~due):
            m.d.sync += interval.eq(interval + 1)
        owed = self.refresh_owed
        with m.If(due & ~ref & (owed != 3)):
            m.d.sync += owed.eq(owed + 1)
        with m.Elif(ref & ~due & (owed != 0)):
            m.d.sync += owed.eq(owed - 1)
        m.d.comb += Assert(owed <= 1, "more than one refresh owed (REF later than tREFI)")

    def _age(self, m, name, event, start=1):
        """Cycles since ``event`` (``start`` in the cycle after it), saturating; far at reset."""
        age = Signal(signed(self._bits), name=f"age_{name}", init=self._sat)
        low = 1 if isinstance(start, int) else 1 - self.config.timing.burst_length
        m.d.comb += Assert((age >= low) & (age <= self._sat), f"age_{name} out of its range")
        with m.If(event):
            m.d.sync += age.eq(start)
        with m.Elif(age < self._sat):
            m.d.sync += age.eq(age + 1)
        return age

    def _window(self, m, act):
        """Ages of the last four ACTs, oldest first: an ACT moves them down one."""
        ages = [Signal(signed(self._bits), name=f"age_act_any{k}", init=self._sat)
                for k in range(FAW_ACTS)]
        for older, newer in zip(ages, ages[1:], strict=False):
            m.d.comb += Assert((newer >= 1) & (older >= newer) & (ages[0] <= self._sat),
                               "ACT window ages out of order")
        for age in ages:
            with m.If(age < self._sat):
                m.d.sync += age.eq(age + 1)
        with m.If(act):
            for older, newer in zip(ages, ages[1:], strict=False):
                m.d.sync += older.eq(newer + (newer < self._sat))
            m.d.sync += ages[-1].eq(1)
        return ages
