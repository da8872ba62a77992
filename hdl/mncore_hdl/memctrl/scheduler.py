"""The command scheduler: which DRAM command (if any) the controller issues this cycle."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import (
    BankStateSignature,
    HeadSignature,
    check_config_and_ports,
    chunk_addr_bits,
    row_bits,
)

__all__ = ["ErrorFlag", "Scheduler", "select_word"]

#: Widest vector :func:`select_word` shifts in one piece (a machine word of a C++ model).
_NATIVE_BITS = 64


def select_word(words, index):
    """``Cat(words).word_select(index, width)``, the same value, built so that no shift is
    wider than 64 bits: a C++ model (Verilator) shifts a wider vector a word at a time, in a
    library call. The words are shifted in groups of a power of two that fit in 64 bits, and
    the group is picked by the index's high bits through a tree of multiplexers. It falls back
    to one ``word_select`` unless ``index`` addresses exactly ``len(words)`` words.

    Parameters
    ----------
    words : sequence of Value
        The words, all of one width, word 0 first.
    index : Value
        Which word.

    Returns
    -------
    Value
        Word ``index``.
    """
    width = len(words[0])
    bits = len(index)
    if len(words) != 1 << bits or any(len(w) != width for w in words):
        return Cat(*words).word_select(index, width)
    low = 0  # words per group: 1 << low
    while low < bits and (2 << low) * width <= _NATIVE_BITS:
        low += 1
    level = [Cat(*words[i:i + (1 << low)]).word_select(index[:low], width) if low else words[i]
             for i in range(0, len(words), 1 << low)]
    for bit in range(low, bits):
        level = [Mux(index[bit], hi, lo) for lo, hi in zip(level[::2], level[1::2], strict=True)]
    return level[0]


class Scheduler(wiring.Component):
    """Choose at most one DRAM command per cycle (purely combinational).

    Three mutually exclusive sources, by priority:

    * **refresh**: while ``refresh_want``, no new work starts; the lowest bank that may be
      precharged is, and REF issues once every bank is closed, tRP has elapsed everywhere and
      ``refresh_ready``. Nothing else issues while a refresh is due or tRFC runs.
    * **primary**: the arbiter's winner (``grant``) moves its bank towards its row (PRE if
      another row is open, ACT if closed) and issues its column command when the row is open,
      tRCD is met, ``bus_free`` and the rules between banks allow its direction
      (``rd_allowed`` / ``wr_allowed``). Every ACT also needs ``act_allowed``. An
      out-of-window chunk skips the DRAM: it only waits for ``bus_free`` (``oow``) and issues
      no command, so the slot stays free for preparation.
    * **preparation**: when the primary issues no ACT, PRE or column command, the slot opens
      (ACT) or closes (PRE) a bank for another port's head chunk or look-ahead row, in fixed
      priority (heads by port, then look-aheads by port). It never touches the primary's bank
      and never closes a row that any head chunk or look-ahead wants.

    Parameters
    ----------
    config : ArchConfig
        Geometry (address split) and widths.
    ports : int
        Number of requester ports.
    ahead : int
        Queued requests each port shows beyond its look-ahead (``HeadSignature``); the
        preparation serves their banks too, after the heads and look-aheads.

    Attributes
    ----------
    ports : In(HeadSignature).array(ports)
        Each port's head chunk, look-ahead and queued requests.
    banks : In(BankStateSignature).array(banks)
        Each bank's state and legal commands.
    grant, grant_valid : Signal, in
        The round-robin winner among ports with an eligible head chunk, and whether any is.
    refresh_want, refresh_ready : Signal, in
        A refresh is due; no refresh is in progress (tRFC has elapsed).
    bus_free : Signal, in
        The data bus may take a new burst this cycle.
    act_allowed, rd_allowed, wr_allowed : Signal, in
        The rules between banks allow an ACT (tRRD, tFAW), a RD or a WR (tCCD, the bus
        turnarounds) this cycle (:class:`~.rank.RankTiming`).
    act, pre, col, ref : Signal, out
        The command issued this cycle (at most one is high).
    oow : Signal, out
        The primary's out-of-window chunk is retired this cycle (it takes the bus, no DRAM
        command). A preparation ACT or PRE may issue in the same cycle.
    bank, row, port : Signal, out
        The issued DRAM command's bank, row (ACT) and port (the primary's for its own
        commands, the prepared chunk's for a preparation). Not the retiring port of ``oow``.
    issue : Signal, out
        The primary's head chunk leaves its port: ``col | oow``.
    issue_port : Signal, out
        The port whose head chunk leaves when ``issue`` (the primary, ``grant``).
    addr, len, write : Signal, out
        The primary's head chunk (its column command moves it when ``issue``).
    """

    def __init__(self, config: ArchConfig, ports: int, ahead: int = 0):
        check_config_and_ports(config, ports)
        self.config = config
        self.port_count = ports
        self.ahead = ahead
        caw = chunk_addr_bits(config)
        super().__init__({
            "ports": In(HeadSignature(config, ahead)).array(ports),
            "banks": In(BankStateSignature(config)).array(config.banks),
            "grant": In(range(ports)),
            "grant_valid": In(1),
            "refresh_want": In(1),
            "refresh_ready": In(1),
            "bus_free": In(1),
            "act_allowed": In(1),
            "rd_allowed": In(1),
            "wr_allowed": In(1),
            "act": Out(1),
            "pre": Out(1),
            "col": Out(1),
            "ref": Out(1),
            "oow": Out(1),
            "bank": Out(max(1, config.bank_bits)),
            "row": Out(row_bits(config)),
            "port": Out(range(ports)),
            "issue": Out(1),
            "issue_port": Out(range(ports)),
            "addr": Out(caw),
            "len": Out(range(config.timing.burst_length + 1)),
            "write": Out(1),
        })

    def _bank(self, addr):
        cb, bb = self.config.col_bits, self.config.bank_bits
        return addr[cb:cb + bb] if bb else Const(0, 1)

    def _row(self, addr):
        return addr[self.config.col_bits + self.config.bank_bits:]

    def elaborate(self, platform):
        m = Module()
        heads = self.ports
        banks = self.banks
        # Per-bank bits packed into one vector each, looked up by a bit select (one shift in a
        # C++ model): an ``Array`` of bits indexed by the bank is a tree of 15 multiplexers.
        # (built once, shared by the primary, the refresh and the preparation)
        vec = {name: self._packed(m, name, [getattr(bs, name) for bs in banks])
               for name in ("is_open", "act_ready", "pre_ready", "col_ready")}
        is_open, pre_ready, col_ready = vec["is_open"], vec["pre_ready"], vec["col_ready"]
        open_rows = [bs.open_row for bs in banks]

        # -- the primary: the arbiter's winner ------------------------------------------------
        g = self.grant
        p_valid = self.grant_valid
        p_oow = Signal(name="p_oow")     # signals: an indexed Array is copied at each use
        p_bank = Signal.like(self.bank)
        p_row = Signal.like(self.row)
        dir_ok = Mux(self.write, self.wr_allowed, self.rd_allowed)
        m.d.comb += [
            self.addr.eq(Array(h.head_addr for h in heads)[g]),
            p_oow.eq(Array(h.head_oow for h in heads)[g]),
            p_bank.eq(self._bank(self.addr)),
            p_row.eq(self._row(self.addr)),
            self.issue_port.eq(g),
            self.len.eq(Array(h.head_len for h in heads)[g]),
            self.write.eq(Array(h.head_write for h in heads)[g]),
        ]

        # -- decision: refresh (r_*), the primary (p*), preparation (s_*) ---------------------
        r_pre, r_ref = Signal(), Signal()
        r_bank = Signal.like(self.bank)
        pa, pp, pc = Signal(), Signal(), Signal()
        sa, sp = Signal(), Signal()
        s_bank = Signal.like(self.bank)
        s_row = Signal.like(self.row)
        s_port = Signal.like(self.port)
        blocked = self.refresh_want | ~self.refresh_ready

        with m.If(self.refresh_want):
            self._refresh(m, vec, r_pre, r_ref, r_bank)
        with m.Elif(~blocked & p_valid):
            with m.If(p_oow):
                m.d.comb += self.oow.eq(self.bus_free)
            with m.Elif(is_open.bit_select(p_bank, 1)
                        & (select_word(open_rows, p_bank) == p_row)):
                m.d.comb += pc.eq(col_ready.bit_select(p_bank, 1) & self.bus_free & dir_ok)
            with m.Elif(~is_open.bit_select(p_bank, 1)):
                m.d.comb += pa.eq(vec["act_ready"].bit_select(p_bank, 1) & self.act_allowed)
            with m.Else():
                m.d.comb += pp.eq(pre_ready.bit_select(p_bank, 1))
        primary_cmd = pa | pp | pc

        self._prepare(m, vec, ~blocked & ~primary_cmd, p_valid & ~p_oow, p_bank,
                      sa, sp, s_bank, s_row, s_port)

        # -- the command ----------------------------------------------------------------------
        m.d.comb += [
            self.act.eq(pa | sa),
            self.pre.eq(pp | sp | r_pre),
            self.col.eq(pc),
            self.ref.eq(r_ref),
            self.issue.eq(pc | self.oow),
        ]
        with m.If(self.refresh_want):
            m.d.comb += self.bank.eq(r_bank)
        with m.Elif(primary_cmd):
            m.d.comb += [self.bank.eq(p_bank), self.row.eq(p_row), self.port.eq(g)]
        with m.Else():
            m.d.comb += [self.bank.eq(s_bank), self.row.eq(s_row), self.port.eq(s_port)]
        return m

    @staticmethod
    def _packed(m, name, bits):
        """The per-bank ``bits`` as one signal, bank ``b`` in bit ``b``."""
        s = Signal(len(bits), name=f"bank_{name}")
        m.d.comb += s.eq(Cat(*bits))
        return s

    def _refresh(self, m, vec, do_pre, do_ref, c_bank):
        """Refresh due: precharge the lowest open bank that may be closed, then REF.

        ``vec``: the banks' packed state bits (``is_open``, ``act_ready``, ...). ``do_pre``,
        ``do_ref`` and ``c_bank`` are this method's outputs.
        """
        nb = len(self.banks)
        any_open = vec["is_open"].any()
        all_idle = vec["act_ready"].all()
        # the lowest bank that may be precharged: its bit isolated (x & -x), then its index
        # bit by bit (a few word operations, not a chain of one test per bank)
        closable = vec["pre_ready"]
        lowest = Signal(nb, name="refresh_lowest")
        m.d.comb += lowest.eq(closable & (~closable + 1)[:nb])
        index = [(lowest & sum(1 << b for b in range(nb) if b >> k & 1)).any()
                 for k in range(len(c_bank))]
        with m.If(closable.any()):
            m.d.comb += [do_pre.eq(1), c_bank.eq(Cat(*index))]
        with m.If(~any_open & all_idle & self.refresh_ready):
            m.d.comb += do_ref.eq(1)

    def _candidates(self):
        """What preparation serves, in priority order: (port, valid, chunk address) of the
        heads by port, then the look-aheads by port, then the queued requests."""
        heads = self.ports
        cands = [(i, h.head_valid & ~h.head_oow, h.head_addr) for i, h in enumerate(heads)]
        cands += [(i, h.la_valid, h.la_addr) for i, h in enumerate(heads)]
        for k in range(self.ahead):
            cands += [(i, h.ahead_valid[k], h.ahead_addr[k]) for i, h in enumerate(heads)]
        return cands

    def _prepare(self, m, vec, enable, p_mem, p_bank, do_act, do_pre, c_bank, c_row, c_port):
        """Use an idle command slot (``enable``) to open (or close) a bank another chunk will
        need.

        ``p_mem``: the primary is a chunk inside the window, in bank ``p_bank``. The ``do_*``
        and ``c_*`` arguments are this method's outputs.

        Built for event-driven simulators: each candidate looks its bank up once (bits of
        per-bank vectors, its bank's open row) and ``protected`` is one OR of one-hot bank
        vectors, instead of a comparison per candidate and bank and a multiplexer per
        candidate and bank property. The open row is looked up with :func:`select_word`:
        a ``word_select`` over all 16 rows (144 bits) was a wide shift in Verilator's C++
        model, a library call per candidate per cycle.
        """
        banks = self.banks
        nb = len(banks)
        cands = self._candidates()
        open_rows = [bs.open_row for bs in banks]
        views = []
        for j, (i, valid, addr) in enumerate(cands):
            b = Signal.like(c_bank, name=f"prep_bank_{j}")
            r = Signal.like(c_row, name=f"prep_row_{j}")
            hit = Signal(name=f"prep_open_{j}")  # its row is its bank's open (or last) row
            m.d.comb += [b.eq(self._bank(addr)), r.eq(self._row(addr)),
                         hit.eq(select_word(open_rows, b) == r)]
            views.append((i, valid, b, r, hit))

        # A row is protected when some candidate (a head chunk, look-ahead or queued
        # request) wants it.
        protected = Signal(nb, name="protected")
        wants = Const(0, nb)
        for _, valid, b, _, hit in views:
            wants = wants | ((valid & hit).as_unsigned() << b)[:nb]
        act_ok = Signal(nb, name="prep_act_ok")
        pre_ok = Signal(nb, name="prep_pre_ok")
        m.d.comb += [
            protected.eq(wants),
            act_ok.eq(vec["act_ready"] & self.act_allowed.replicate(nb)),
            pre_ok.eq(vec["is_open"] & vec["pre_ready"] & ~protected),
        ]

        # Fixed priority among candidates: preparation is an optimisation, never needed
        # for progress (the primary prepares its own bank), so it need not be fair.
        p_in = Signal(name="prep_primary_in_window")
        m.d.comb += p_in.eq(p_mem)
        pick = []
        for j, (i, valid, b, r, hit) in enumerate(views):
            mine = valid & ~(p_in & (b == p_bank)) if nb > 1 else valid & ~p_in
            can_act = Signal(name=f"prep_can_act_{j}")
            can_pre = Signal(name=f"prep_can_pre_{j}")
            m.d.comb += [can_act.eq(act_ok.bit_select(b, 1)),
                         can_pre.eq(pre_ok.bit_select(b, 1) & ~hit)]
            pick.append((i, mine & (can_act | can_pre), can_act, b, r))
        with m.If(enable):
            for i, want, can_act, b, r in reversed(pick):
                with m.If(want):
                    m.d.comb += [
                        do_act.eq(can_act),
                        do_pre.eq(~can_act),
                        c_bank.eq(b),
                        c_row.eq(r),
                        c_port.eq(i),
                    ]


class ErrorFlag(wiring.Component):
    """Sticky record of the first out-of-window chunk the scheduler retired.

    Parameters
    ----------
    config : ArchConfig
        Address width.

    Attributes
    ----------
    oow, addr : Signal, in
        An out-of-window chunk starting at LW ``addr`` is retired this cycle.
    clear : Signal, in
        Clear the flag (wins over a new ``oow`` in the same cycle).
    error, error_addr : Signal, out
        The flag, from the cycle after the first ``oow``, and that chunk's address.
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        caw = chunk_addr_bits(config)
        super().__init__({
            "oow": In(1),
            "addr": In(caw),
            "clear": In(1),
            "error": Out(1),
            "error_addr": Out(caw),
        })

    def elaborate(self, platform):
        m = Module()
        with m.If(self.clear):
            m.d.sync += self.error.eq(0)
        with m.Elif(self.oow & ~self.error):
            m.d.sync += [self.error.eq(1), self.error_addr.eq(self.addr)]
        return m
