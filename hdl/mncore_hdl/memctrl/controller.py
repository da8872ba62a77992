"""The Group memory controller top: wires ports, arbiter, scheduler, banks, refresh, data bus."""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import CSR_ADDR_BITS, Cmd
from .arbiter import RoundRobin
from .backend import CommandBackend
from .csr import StatsRegisters
from .frfcfs import FrFcfs
from .port import RequesterSignature
from .reorder import ReorderFrontend
from .requester import PortFrontend
from .signatures import chunk_addr_bits, row_bits

__all__ = ["Cmd", "MemoryController", "check_config", "head_ahead", "queue_depth"]


def queue_depth(config: ArchConfig, ports: int) -> int:
    """Requests each port queues: 1 in order; with ``fr_fcfs``, ``scheduler_window`` chunks
    (each port's own window, so that a port alone has the whole window to choose from)."""
    if config.scheduler == "fr_fcfs":
        return config.scheduler_window
    return 1


def head_ahead(config: ArchConfig, ports: int) -> int:
    """Queued requests each port's head shows beyond its look-ahead: the reordering frontend
    shows all its window entries, the in-order one those behind its next request."""
    depth = queue_depth(config, ports)
    return depth if config.scheduler == "fr_fcfs" else depth - 1


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
    blocks: port frontends, arbiter, the command back end (:class:`~.backend.CommandBackend`:
    scheduler, bank machines, rank timing, refresher, data engine, error flag) and counters.

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

    #: The reordering frontend's class (a proof harness substitutes one whose state it reads).
    reorder_frontend = ReorderFrontend

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
        ahead = head_ahead(cfg, n)
        fes = []
        for i in range(n):
            fe = self.reorder_frontend(cfg, depth) if fr else PortFrontend(cfg, depth)
            m.submodules[f"port{i}"] = fe
            wiring.connect(m, wiring.flipped(self.ports[i]), fe.bus)
            fes.append(fe)
        if fr:
            m.submodules.arbiter = arb = FrFcfs(cfg, n, ahead)
        else:
            m.submodules.arbiter = arb = RoundRobin(n)
        m.submodules.backend = be = CommandBackend(cfg, n, ahead)
        m.submodules.stats = stats = StatsRegisters(n, chunk_addr_bits(cfg))
        self.backend = be
        self.engine = be.engine
        self.scheduler = be.scheduler

        # -- the backend's inputs: port heads and the arbiter's grant -------------------------
        for i, fe in enumerate(fes):
            wiring.connect(m, fe.head, be.heads[i], *([arb.heads[i]] if fr else []))
        if fr:
            for b in range(cfg.banks):
                wiring.connect(m, be.banks[b], arb.banks[b], *(fe.banks[b] for fe in fes))
            for block in (arb, *fes):
                m.d.comb += [
                    block.bus_free.eq(be.bus_free),
                    block.rd_allowed.eq(be.rd_allowed),
                    block.wr_allowed.eq(be.wr_allowed),
                ]
        m.d.comb += [
            arb.requests.eq(Cat(fe.head_eligible for fe in fes)),
            be.grant.eq(arb.grant),
            be.grant_valid.eq(arb.valid),
            arb.advance.eq(be.issue),
            be.error_clear.eq(self.error_clear),
            self.error.eq(be.error),
            self.error_addr.eq(be.error_addr),
        ]
        for i, fe in enumerate(fes):
            m.d.comb += fe.issue.eq(be.issue & (be.issue_port == i))

        # -- data beats between the engine and the ports --------------------------------------
        for i, fe in enumerate(fes):
            m.d.comb += [
                be.wbeat_data[i].eq(fe.wbeat_data),
                be.wbeat_strb[i].eq(fe.wbeat_strb),
                fe.wpop.eq(be.wpop[i]),
                fe.rpush.eq(be.rpush[i]),
                fe.rpush_data.eq(be.rpush_data),
                fe.rpush_error.eq(be.rpush_error),
            ]

        # -- observation and counters -----------------------------------------------------------
        m.d.comb += [getattr(self, name).eq(getattr(be, name))
                     for name in ("cmd_valid", "cmd_kind", "cmd_bank", "cmd_row", "cmd_port",
                                  "cmd_len", "cmd_col", "refresh_pending")]
        m.d.comb += [
            self.idle.eq(~Cat(fe.pending for fe in fes).any() & ~be.data_busy),
            stats.hit.eq(be.hit),
            stats.miss.eq(be.miss),
            stats.conflict.eq(be.conflict),
            stats.refresh.eq(be.refresh),
            stats.refresh_cycle.eq(be.refreshing),
            stats.busy.eq(Cat(fe.head.head_valid for fe in fes).any() | be.data_active),
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
