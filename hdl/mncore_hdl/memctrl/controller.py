"""The Group memory controller top: wires ports, arbiter, scheduler, banks, refresh, data bus."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import CSR_ADDR_BITS, Cmd
from .arbiter import RoundRobin
from .bankmachine import BankMachine
from .csr import StatsRegisters
from .datapath import DataEngine
from .frfcfs import FrFcfs
from .port import RequesterSignature
from .rank import RankTiming
from .refresher import Refresher
from .reorder import ReorderFrontend
from .requester import PortFrontend
from .scheduler import ErrorFlag, Scheduler
from .signatures import chunk_addr_bits, row_bits

__all__ = ["Cmd", "MemoryController", "check_config", "queue_depth"]


def queue_depth(config: ArchConfig, ports: int) -> int:
    """Requests each port queues: 1 in order; with ``fr_fcfs``, ``scheduler_window`` chunks
    (each port's own window, so that a port alone has the whole window to choose from)."""
    if config.scheduler == "fr_fcfs":
        return config.scheduler_window
    return 1


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

    Each cycle the scheduler (:class:`~.scheduler.Scheduler`) issues at most one DRAM command.
    Refresh comes first: while one is due, no new work starts, open banks are precharged, then
    REF. Otherwise the round-robin winner among ports with an eligible chunk (the *primary*)
    moves its own bank towards its row (PRE, ACT) and issues its column command when the bank
    and the data bus allow. When the primary issues nothing, the command slot prepares a bank
    for another port's chunk or look-ahead row (ACT of a closed bank, or PRE of a row nobody is
    about to use), which hides row changes behind data transfers. This top only wires the
    blocks: port frontends, arbiter, bank machines, refresher, scheduler, data engine, error
    flag and counters.

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
    cmd_col : Signal, out
        The column (LW inside the row) of a RD or WR, 0 otherwise: with ``fr_fcfs`` a port's
        chunks may issue out of request order, and this tells which one did.
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
            "cmd_col": Out(max(1, config.col_bits)),
            "refresh_pending": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        n = self.port_count

        # -- sub-blocks -----------------------------------------------------------------------
        depth = queue_depth(cfg, n)
        fr = cfg.scheduler == "fr_fcfs"
        # the reordering frontend shows all its window entries; the in-order one those
        # behind its next request
        ahead = depth if fr else depth - 1
        fes = []
        for i in range(n):
            fe = ReorderFrontend(cfg, depth) if fr else PortFrontend(cfg, depth)
            m.submodules[f"port{i}"] = fe
            wiring.connect(m, wiring.flipped(self.ports[i]), fe.bus)
            fes.append(fe)
        bms = []
        for b in range(cfg.banks):
            bm = BankMachine(cfg)
            m.submodules[f"bank{b}"] = bm
            bms.append(bm)
        if fr:
            m.submodules.arbiter = arb = FrFcfs(cfg, n, ahead)
        else:
            m.submodules.arbiter = arb = RoundRobin(n)
        m.submodules.refresher = ref = Refresher(cfg)
        m.submodules.rank = rank = RankTiming(cfg)
        m.submodules.scheduler = sched = Scheduler(cfg, n, ahead)
        m.submodules.engine = eng = DataEngine(cfg, n)
        m.submodules.error_flag = err = ErrorFlag(cfg)
        m.submodules.stats = stats = StatsRegisters(n, chunk_addr_bits(cfg))
        self.engine = eng
        self.scheduler = sched

        # -- scheduler inputs: port heads, bank states, arbiter, refresher, data bus ----------
        for i, fe in enumerate(fes):
            wiring.connect(m, fe.head, sched.ports[i], *([arb.heads[i]] if fr else []))
        for b, bm in enumerate(bms):
            views = [arb.banks[b], *(fe.banks[b] for fe in fes)] if fr else []
            wiring.connect(m, bm.state, sched.banks[b], *views)
        if fr:
            for block in (arb, *fes):
                m.d.comb += [
                    block.bus_free.eq(eng.free),
                    block.rd_allowed.eq(rank.rd_ready),
                    block.wr_allowed.eq(rank.wr_ready),
                ]
        m.d.comb += [
            arb.requests.eq(Cat(fe.head_eligible for fe in fes)),
            sched.grant.eq(arb.grant),
            sched.grant_valid.eq(arb.valid),
            sched.refresh_want.eq(ref.want),
            sched.refresh_ready.eq(ref.trfc_ready),
            sched.bus_free.eq(eng.free),
            sched.act_allowed.eq(rank.act_ready),
            sched.rd_allowed.eq(rank.rd_ready),
            sched.wr_allowed.eq(rank.wr_ready),
        ]

        # -- the issued command to the blocks it affects --------------------------------------
        m.d.comb += arb.advance.eq(sched.issue)
        for i, fe in enumerate(fes):
            m.d.comb += fe.issue.eq(sched.issue & (sched.issue_port == i))
        for b, bm in enumerate(bms):
            m.d.comb += [
                bm.act.eq(sched.act & (sched.bank == b)),
                bm.act_row.eq(sched.row),
                bm.pre.eq(sched.pre & (sched.bank == b)),
                bm.col.eq(sched.col & (sched.bank == b)),
                bm.col_write.eq(sched.write),
                bm.wbeat.eq(eng.active & eng.write & ~eng.oow & (eng.bank == b)),
                bm.data_busy.eq(eng.active & ~eng.oow & (eng.bank == b)),
            ]
        m.d.comb += [
            rank.act.eq(sched.act),
            rank.col.eq(sched.col),
            rank.col_write.eq(sched.write),
            rank.rbeat.eq(eng.active & ~eng.write & ~eng.oow),
            rank.wbeat.eq(eng.active & eng.write & ~eng.oow),
            ref.issue.eq(sched.ref),
            eng.load.eq(sched.issue),
            eng.load_addr.eq(sched.addr),
            eng.load_len.eq(sched.len),
            eng.load_write.eq(sched.write),
            eng.load_oow.eq(sched.oow),
            eng.load_port.eq(sched.issue_port),
            err.oow.eq(sched.oow),
            err.addr.eq(sched.addr),
            err.clear.eq(self.error_clear),
            self.error.eq(err.error),
            self.error_addr.eq(err.error_addr),
        ]

        # -- data beats between the engine and the ports --------------------------------------
        for i, fe in enumerate(fes):
            m.d.comb += [
                eng.wbeat_data[i].eq(fe.wbeat_data),
                eng.wbeat_strb[i].eq(fe.wbeat_strb),
                fe.wpop.eq(eng.wpop[i]),
                fe.rpush.eq(eng.rpush[i]),
                fe.rpush_data.eq(eng.rpush_data),
                fe.rpush_error.eq(eng.rpush_error),
            ]

        # -- observation and counters -----------------------------------------------------------
        kind = Signal(3)
        with m.If(sched.ref):
            m.d.comb += kind.eq(Cmd.REF)
        with m.Elif(sched.act):
            m.d.comb += kind.eq(Cmd.ACT)
        with m.Elif(sched.pre):
            m.d.comb += kind.eq(Cmd.PRE)
        with m.Elif(sched.col):
            m.d.comb += kind.eq(Mux(sched.write, Cmd.WR, Cmd.RD))
        fresh = Array(bm.fresh for bm in bms)[sched.bank]
        m.d.comb += [
            self.cmd_valid.eq(sched.act | sched.pre | sched.col | sched.ref),
            self.cmd_kind.eq(kind),
            self.cmd_bank.eq(sched.bank),
            self.cmd_row.eq(sched.row),
            self.cmd_port.eq(sched.port),
            self.cmd_len.eq(Mux(sched.col, sched.len, 0)),
            self.cmd_col.eq(Mux(sched.col, sched.addr[:cfg.col_bits], 0)),
            self.refresh_pending.eq(ref.want),
            self.idle.eq(~Cat(fe.pending for fe in fes).any() & ~eng.active & ~eng.pipe_busy),
            stats.hit.eq(sched.col & ~fresh),
            stats.miss.eq(sched.col & fresh),
            stats.conflict.eq(sched.pre & ~ref.want),
            stats.refresh.eq(sched.ref),
            stats.refresh_cycle.eq(sched.ref | ~ref.trfc_ready),
            stats.busy.eq(Cat(fe.head.head_valid for fe in fes).any() | eng.active),
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

