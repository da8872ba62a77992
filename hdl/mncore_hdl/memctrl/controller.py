"""The Group memory controller top: ports, arbiter, scheduler, bank machines, refresh, data bus."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.memctrl import Cmd
from .arbiter import RoundRobin
from .bankmachine import BankMachine, row_bits
from .csr import COUNTER_BITS, CSR_ADDR_BITS, StatsRegisters
from .datapath import DataEngine
from .port import RequesterSignature
from .refresher import Refresher
from .requester import PortFrontend, chunk_addr_bits

__all__ = ["Cmd", "MemoryController", "check_config"]


def check_config(config: object) -> ArchConfig:
    """Validate that the controller can implement ``config``; return it."""
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if config.port_lw_per_cycle != 1:
        raise ValueError("The memory controller moves one LW per cycle per port; "
                         f"port_lw_per_cycle must be 1, not {config.port_lw_per_cycle}")
    if config.sim_window_lw % config.timing.burst_length:
        raise ValueError(f"sim_window_lw must be a multiple of the burst length "
                         f"({config.timing.burst_length}), not {config.sim_window_lw}")
    if config.timing.cl < 2:
        raise ValueError(f"CAS latency must be at least 2 cycles, not {config.timing.cl}")
    return config


class MemoryController(wiring.Component):
    """One Group's DRAM controller with ``ports`` requester ports.

    Each cycle the scheduler issues at most one DRAM command. Refresh comes first: while
    one is due, no new work starts, open banks are precharged, then REF. Otherwise the
    round-robin winner among ports with an eligible chunk (the *primary*) moves its own bank
    towards its row (PRE, ACT) and issues its column command when the bank and the data bus
    allow. When the primary issues nothing, the command slot prepares a bank for another
    port's chunk or look-ahead row (ACT of a closed bank, or PRE of a row nobody is about to
    use), which hides row changes behind data transfers.

    Parameters
    ----------
    config : ArchConfig
        The only source of geometry and timing.
    ports : int
        Number of requester ports (host, compute, converter, ...).

    Attributes
    ----------
    ports : In(RequesterSignature).array(ports)
        The requester ports (Verilog names ``ports__<i>__req__valid`` ...).
    csr_addr, csr_rdata : Signal
        Register read port (see :mod:`.csr`); data one cycle after the address.
    error, error_addr, error_clear : Signal
        Sticky out-of-window flag, the first offending LW address, and its clear strobe.
    cmd_valid, cmd_kind, cmd_bank, cmd_row, cmd_port, cmd_len : Signal, out
        The DRAM command issued this cycle (observation only; ``cmd_kind`` is a :class:`Cmd`).
    refresh_pending, idle : Signal, out
        A refresh is due; nothing is queued or in flight.
    """

    def __init__(self, config: ArchConfig, ports: int = 3):
        check_config(config)
        if isinstance(ports, bool) or not isinstance(ports, int):
            raise TypeError(f"Port count must be an integer, not {ports!r}")
        if not 1 <= ports <= 8:
            raise ValueError(f"Port count must be between 1 and 8, not {ports}")
        self.config = config
        self.port_count = ports
        bl = config.timing.burst_length
        super().__init__({
            "ports": In(RequesterSignature(config)).array(ports),
            "csr_addr": In(CSR_ADDR_BITS),
            "csr_rdata": Out(COUNTER_BITS),
            "error": Out(1),
            "error_addr": Out(chunk_addr_bits(config)),
            "error_clear": In(1),
            "cmd_valid": Out(1),
            "cmd_kind": Out(3),
            "cmd_bank": Out(max(1, config.bank_bits)),
            "cmd_row": Out(row_bits(config)),
            "cmd_port": Out(range(ports)),
            "cmd_len": Out(range(bl + 1)),
            "refresh_pending": Out(1),
            "idle": Out(1),
        })

    def _bank(self, addr):
        cb, bb = self.config.col_bits, self.config.bank_bits
        return addr[cb:cb + bb] if bb else Const(0, 1)

    def _row(self, addr):
        return addr[self.config.col_bits + self.config.bank_bits:]

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        n = self.port_count
        nb = cfg.banks

        # -- sub-blocks -----------------------------------------------------------------------
        fes = []
        for i in range(n):
            fe = PortFrontend(cfg)
            m.submodules[f"port{i}"] = fe
            wiring.connect(m, wiring.flipped(self.ports[i]), fe.bus)
            fes.append(fe)
        bms = []
        for b in range(nb):
            bm = BankMachine(cfg)
            m.submodules[f"bank{b}"] = bm
            bms.append(bm)
        m.submodules.arbiter = arb = RoundRobin(n)
        m.submodules.refresher = ref = Refresher(cfg)
        m.submodules.engine = eng = DataEngine(cfg, n)
        m.submodules.stats = stats = StatsRegisters(n, chunk_addr_bits(cfg))
        self.engine = eng

        is_open = Array(bm.is_open for bm in bms)
        open_row = Array(bm.open_row for bm in bms)
        act_ready = Array(bm.act_ready for bm in bms)
        pre_ready = Array(bm.pre_ready for bm in bms)
        col_ready = Array(bm.col_ready for bm in bms)
        fresh = Array(bm.fresh for bm in bms)

        # -- the primary: round-robin winner among eligible chunks ----------------------------
        m.d.comb += arb.requests.eq(Cat(fe.head_eligible for fe in fes))
        g = arb.grant
        p_valid = arb.valid
        p_addr = Array(fe.head_addr for fe in fes)[g]
        p_len = Array(fe.head_len for fe in fes)[g]
        p_write = Array(fe.head_write for fe in fes)[g]
        p_oow = Array(fe.head_oow for fe in fes)[g]
        p_bank = Signal.like(self.cmd_bank)
        p_row = Signal.like(self.cmd_row)
        m.d.comb += [p_bank.eq(self._bank(p_addr)), p_row.eq(self._row(p_addr))]

        # -- command decision -----------------------------------------------------------------
        # Three mutually exclusive sources: refresh (r_*), the primary (p_*), preparation (s_*).
        r_pre, r_ref = Signal(), Signal()
        r_bank = Signal.like(self.cmd_bank)
        pa, pp, pc, do_oow = Signal(), Signal(), Signal(), Signal()
        sa, sp = Signal(), Signal()
        s_bank = Signal.like(self.cmd_bank)
        s_row = Signal.like(self.cmd_row)
        s_port = Signal.like(self.cmd_port)
        blocked = ref.want | ~ref.trfc_ready

        with m.If(ref.want):
            self._refresh(m, bms, ref, r_pre, r_ref, r_bank)
        with m.Elif(~blocked & p_valid):
            with m.If(p_oow):
                m.d.comb += do_oow.eq(eng.free)
            with m.Elif(is_open[p_bank] & (open_row[p_bank] == p_row)):
                m.d.comb += pc.eq(col_ready[p_bank] & eng.free)
            with m.Elif(~is_open[p_bank]):
                m.d.comb += pa.eq(act_ready[p_bank])
            with m.Else():
                m.d.comb += pp.eq(pre_ready[p_bank])
        primary_cmd = pa | pp | pc

        with m.If(~blocked & ~primary_cmd):
            self._prepare(m, fes, bms, p_valid & ~p_oow, p_bank, sa, sp, s_bank, s_row, s_port)

        do_act = Signal()
        do_pre = Signal()
        do_col = Signal()
        do_ref = Signal()
        c_bank = Signal.like(self.cmd_bank)
        c_row = Signal.like(self.cmd_row)
        c_port = Signal.like(self.cmd_port)
        m.d.comb += [
            do_act.eq(pa | sa),
            do_pre.eq(pp | sp | r_pre),
            do_col.eq(pc),
            do_ref.eq(r_ref),
        ]
        with m.If(ref.want):
            m.d.comb += c_bank.eq(r_bank)
        with m.Elif(primary_cmd | do_oow):
            m.d.comb += [c_bank.eq(p_bank), c_row.eq(p_row), c_port.eq(g)]
        with m.Else():
            m.d.comb += [c_bank.eq(s_bank), c_row.eq(s_row), c_port.eq(s_port)]

        # -- effects ----------------------------------------------------------------------------
        issue = do_col | do_oow
        m.d.comb += arb.advance.eq(issue)
        for i, fe in enumerate(fes):
            m.d.comb += fe.issue.eq(issue & (g == i))
        for b, bm in enumerate(bms):
            m.d.comb += [
                bm.act.eq(do_act & (c_bank == b)),
                bm.act_row.eq(c_row),
                bm.pre.eq(do_pre & (c_bank == b)),
                bm.col.eq(do_col & (c_bank == b)),
                bm.col_write.eq(p_write),
                bm.wbeat.eq(eng.active & eng.write & ~eng.oow & (eng.bank == b)),
                bm.data_busy.eq(eng.active & ~eng.oow & (eng.bank == b)),
            ]
        m.d.comb += [
            ref.issue.eq(do_ref),
            eng.load.eq(issue),
            eng.load_addr.eq(p_addr),
            eng.load_len.eq(p_len),
            eng.load_write.eq(p_write),
            eng.load_oow.eq(p_oow),
            eng.load_port.eq(g),
        ]
        for i, fe in enumerate(fes):
            m.d.comb += [
                eng.wbeat_data[i].eq(fe.wbeat_data),
                eng.wbeat_strb[i].eq(fe.wbeat_strb),
                fe.wpop.eq(eng.wpop[i]),
                fe.rpush.eq(eng.rpush[i]),
                fe.rpush_data.eq(eng.rpush_data),
                fe.rpush_error.eq(eng.rpush_error),
            ]

        # -- error flag: first out-of-window address, sticky until cleared ----------------------
        with m.If(self.error_clear):
            m.d.sync += self.error.eq(0)
        with m.Elif(do_oow & ~self.error):
            m.d.sync += [self.error.eq(1), self.error_addr.eq(p_addr)]

        # -- observation and counters -----------------------------------------------------------
        kind = Signal(3)
        with m.If(do_ref):
            m.d.comb += kind.eq(Cmd.REF)
        with m.Elif(do_act):
            m.d.comb += kind.eq(Cmd.ACT)
        with m.Elif(do_pre):
            m.d.comb += kind.eq(Cmd.PRE)
        with m.Elif(do_col):
            m.d.comb += kind.eq(Cmd.RD)
            with m.If(p_write):
                m.d.comb += kind.eq(Cmd.WR)
        busy = Cat(fe.head_valid for fe in fes).any() | eng.active
        m.d.comb += [
            self.cmd_valid.eq(do_act | do_pre | do_col | do_ref),
            self.cmd_kind.eq(kind),
            self.cmd_bank.eq(c_bank),
            self.cmd_row.eq(c_row),
            self.cmd_port.eq(c_port),
            self.cmd_len.eq(Mux(do_col, p_len, 0)),
            self.refresh_pending.eq(ref.want),
            self.idle.eq(~Cat(fe.pending for fe in fes).any() & ~eng.active & ~eng.pipe_busy),
            stats.hit.eq(do_col & ~fresh[p_bank]),
            stats.miss.eq(do_col & fresh[p_bank]),
            stats.conflict.eq(do_pre & ~ref.want),
            stats.refresh.eq(do_ref),
            stats.refresh_cycle.eq(do_ref | ~ref.trfc_ready),
            stats.busy.eq(busy),
            stats.error.eq(self.error),
            stats.error_addr.eq(self.error_addr),
            stats.csr_addr.eq(self.csr_addr),
            self.csr_rdata.eq(stats.csr_rdata),
        ]
        for i, fe in enumerate(fes):
            m.d.comb += [
                stats.read_beats[i].eq(fe.read_beats),
                stats.write_beats[i].eq(fe.write_beats),
                stats.stall_cycles[i].eq(fe.stall_cycles),
            ]
        return m

    # -- scheduler pieces ------------------------------------------------------------------------

    def _refresh(self, m, bms, ref, do_pre, do_ref, c_bank):
        # (arguments are this method's own outputs: r_pre, r_ref, r_bank)
        """Refresh due: precharge the lowest open bank that may be closed, then REF."""
        any_open = Cat(bm.is_open for bm in bms).any()
        all_idle = Cat(bm.act_ready for bm in bms).all()
        for b in reversed(range(len(bms))):
            with m.If(bms[b].pre_ready):
                m.d.comb += [do_pre.eq(1), c_bank.eq(b)]
        with m.If(~any_open & all_idle & ref.trfc_ready):
            m.d.comb += do_ref.eq(1)

    def _prepare(self, m, fes, bms, p_mem, p_bank, do_act, do_pre, c_bank, c_row, c_port):
        # (the do_*/c_* arguments are this method's own outputs: sa, sp, s_bank, s_row, s_port)
        """Use an idle command slot to open (or close) a bank another chunk will need."""
        nb = len(bms)
        # A row is protected when some port's head chunk or look-ahead wants it.
        protected = []
        for b, bm in enumerate(bms):
            hits = []
            for fe in fes:
                hits.append(fe.head_valid & ~fe.head_oow & (self._bank(fe.head_addr) == b)
                            & (self._row(fe.head_addr) == bm.open_row))
                hits.append(fe.la_valid & (self._bank(fe.la_addr) == b)
                            & (self._row(fe.la_addr) == bm.open_row))
            protected.append(Cat(*hits).any())
        protected = Array(protected)
        is_open = Array(bm.is_open for bm in bms)
        open_row = Array(bm.open_row for bm in bms)
        act_ready = Array(bm.act_ready for bm in bms)
        pre_ready = Array(bm.pre_ready for bm in bms)

        cands = []
        for i, fe in enumerate(fes):
            cands.append((i, fe.head_valid & ~fe.head_oow, fe.head_addr))
        for i, fe in enumerate(fes):
            cands.append((i, fe.la_valid, fe.la_addr))
        # Fixed priority among candidates: preparation is an optimisation, never needed
        # for progress (the primary prepares its own bank), so it need not be fair.
        for i, valid, addr in reversed(cands):
            b = Signal.like(c_bank, name=f"prep_bank_{i}")
            r = Signal.like(c_row, name=f"prep_row_{i}")
            m.d.comb += [b.eq(self._bank(addr)), r.eq(self._row(addr))]
            mine = valid & ~(p_mem & (b == p_bank)) if nb > 1 else valid & ~p_mem
            can_act = act_ready[b]
            can_pre = is_open[b] & (open_row[b] != r) & pre_ready[b] & ~protected[b]
            with m.If(mine & (can_act | can_pre)):
                m.d.comb += [
                    do_act.eq(can_act),
                    do_pre.eq(~can_act),
                    c_bank.eq(b),
                    c_row.eq(r),
                    c_port.eq(i),
                ]
