"""The controller below its ports: scheduler, bank machines, rank timing, refresh, data bus."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.memctrl import Cmd
from .bankmachine import BankMachine
from .datapath import DataEngine
from .rank import RankTiming
from .refresher import Refresher
from .scheduler import ErrorFlag, Scheduler
from .signatures import BankStateSignature, HeadSignature, chunk_addr_bits, row_bits

__all__ = ["CommandBackend"]


class CommandBackend(wiring.Component):
    """Everything of one controller that decides and times DRAM commands and moves their data.

    The blocks below the port frontends and the arbiter, wired once: the scheduler
    (:class:`~.scheduler.Scheduler`), one :class:`~.bankmachine.BankMachine` per bank, the
    rules between banks (:class:`~.rank.RankTiming`), the :class:`~.refresher.Refresher`, the
    data engine with the backing store (:class:`~.datapath.DataEngine`) and the out-of-window
    :class:`~.scheduler.ErrorFlag`. Every DRAM command is issued here, so every timing rule is
    kept here: a proof of the command stream may leave the ports' side free
    (``formal/backend.py``) and hold for any frontend that shows legal heads.

    Parameters
    ----------
    config : ArchConfig
        Geometry and timing.
    ports : int
        Requester ports.
    ahead : int
        Queued requests each port's head shows beyond its look-ahead
        (:class:`~.signatures.HeadSignature`).

    Attributes
    ----------
    heads : In(HeadSignature).array(ports)
        Each port frontend's head chunk, look-ahead and queued requests.
    grant, grant_valid : Signal, in
        The arbiter's winner among ports with an eligible head chunk, and whether any is.
    banks : Out(BankStateSignature).array(banks)
        Each bank's state, for blocks that choose by it (the FR-FCFS arbiter and frontends).
    bus_free, rd_allowed, wr_allowed : Signal, out
        The data bus may take a burst; the rules between banks allow a RD / a WR.
    issue, issue_port : Signal, out
        A port's head chunk leaves this cycle (column command or out-of-window drop), and whose.
    wbeat_data, wbeat_strb : Signal array, in; wpop, rpush, rpush_data, rpush_error : out
        The data beats between the data engine and the ports' FIFOs.
    error_clear : Signal, in; error, error_addr : Signal, out
        The sticky out-of-window flag.
    cmd_valid, cmd_kind, cmd_bank, cmd_row, cmd_port, cmd_len, cmd_col : Signal, out
        The DRAM command issued this cycle (observation only).
    refresh_pending : Signal, out
        A refresh is due.
    hit, miss, conflict, refresh, refreshing : Signal, out
        Events for the counters: a column to a row already used / just opened, a PRE outside
        refresh, a REF, a cycle of REF or tRFC.
    data_active, data_busy : Signal, out
        A burst is on the data bus; a burst or its read beats are still in flight.

    ``scheduler``, ``engine``, ``refresher`` and ``bank_machines`` are the blocks, for
    proofs and tests that watch their state.
    """

    def __init__(self, config: ArchConfig, ports: int, ahead: int = 0):
        self.config = config
        self.port_count = ports
        self.ahead = ahead
        self.scheduler = Scheduler(config, ports, ahead)
        self.engine = DataEngine(config, ports)
        self.refresher = Refresher(config)
        self.rank = RankTiming(config)
        self.bank_machines = [BankMachine(config) for _ in range(config.banks)]
        self.error_flag = ErrorFlag(config)
        caw = chunk_addr_bits(config)
        super().__init__({
            "heads": In(HeadSignature(config, ahead)).array(ports),
            "grant": In(range(ports)),
            "grant_valid": In(1),
            "banks": Out(BankStateSignature(config)).array(config.banks),
            "bus_free": Out(1),
            "rd_allowed": Out(1),
            "wr_allowed": Out(1),
            "issue": Out(1),
            "issue_port": Out(range(ports)),
            "wbeat_data": In(config.lw_bits).array(ports),
            "wbeat_strb": In(config.lw_bytes).array(ports),
            "wpop": Out(ports),
            "rpush": Out(ports),
            "rpush_data": Out(config.lw_bits),
            "rpush_error": Out(1),
            "error_clear": In(1),
            "error": Out(1),
            "error_addr": Out(caw),
            "cmd_valid": Out(1),
            "cmd_kind": Out(3),
            "cmd_bank": Out(max(1, config.bank_bits)),
            "cmd_row": Out(row_bits(config)),
            "cmd_port": Out(range(ports)),
            "cmd_len": Out(range(config.timing.burst_length + 1)),
            "cmd_col": Out(max(1, config.col_bits)),
            "refresh_pending": Out(1),
            "hit": Out(1),
            "miss": Out(1),
            "conflict": Out(1),
            "refresh": Out(1),
            "refreshing": Out(1),
            "data_active": Out(1),
            "data_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        sched, eng, ref, rank, err = (self.scheduler, self.engine, self.refresher, self.rank,
                                      self.error_flag)
        bms = self.bank_machines
        m.submodules.scheduler = sched
        m.submodules.engine = eng
        m.submodules.refresher = ref
        m.submodules.rank = rank
        m.submodules.error_flag = err
        for b, bm in enumerate(bms):
            m.submodules[f"bank{b}"] = bm

        # -- scheduler inputs: port heads, bank states, arbiter, refresher, data bus ----------
        for i in range(self.port_count):
            wiring.connect(m, wiring.flipped(self.heads[i]), sched.ports[i])
        for b, bm in enumerate(bms):
            wiring.connect(m, bm.state, sched.banks[b], wiring.flipped(self.banks[b]))
        m.d.comb += [
            sched.grant.eq(self.grant),
            sched.grant_valid.eq(self.grant_valid),
            sched.refresh_want.eq(ref.want),
            sched.refresh_ready.eq(ref.trfc_ready),
            sched.bus_free.eq(eng.free),
            sched.act_allowed.eq(rank.act_ready),
            sched.rd_allowed.eq(rank.rd_ready),
            sched.wr_allowed.eq(rank.wr_ready),
            self.bus_free.eq(eng.free),
            self.rd_allowed.eq(rank.rd_ready),
            self.wr_allowed.eq(rank.wr_ready),
            self.issue.eq(sched.issue),
            self.issue_port.eq(sched.issue_port),
        ]

        # -- the issued command to the blocks it affects --------------------------------------
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
        for i in range(self.port_count):
            m.d.comb += [
                eng.wbeat_data[i].eq(self.wbeat_data[i]),
                eng.wbeat_strb[i].eq(self.wbeat_strb[i]),
            ]
        m.d.comb += [
            self.wpop.eq(eng.wpop),
            self.rpush.eq(eng.rpush),
            self.rpush_data.eq(eng.rpush_data),
            self.rpush_error.eq(eng.rpush_error),
        ]

        # -- observation and events ---------------------------------------------------------------
        kind = Signal(3)
        with m.If(sched.ref):
            m.d.comb += kind.eq(Cmd.REF)
        with m.Elif(sched.act):
            m.d.comb += kind.eq(Cmd.ACT)
        with m.Elif(sched.pre):
            m.d.comb += kind.eq(Cmd.PRE)
        with m.Elif(sched.col):
            m.d.comb += kind.eq(Mux(sched.write, Cmd.WR, Cmd.RD))
        fresh = Cat(bm.fresh for bm in bms).bit_select(sched.bank, 1)
        m.d.comb += [
            self.cmd_valid.eq(sched.act | sched.pre | sched.col | sched.ref),
            self.cmd_kind.eq(kind),
            self.cmd_bank.eq(sched.bank),
            self.cmd_row.eq(sched.row),
            self.cmd_port.eq(sched.port),
            self.cmd_len.eq(Mux(sched.col, sched.len, 0)),
            self.cmd_col.eq(Mux(sched.col, sched.addr[:cfg.col_bits], 0)),
            self.refresh_pending.eq(ref.want),
            self.hit.eq(sched.col & ~fresh),
            self.miss.eq(sched.col & fresh),
            self.conflict.eq(sched.pre & ~ref.want),
            self.refresh.eq(sched.ref),
            self.refreshing.eq(sched.ref | ~ref.trfc_ready),
            self.data_active.eq(eng.active),
            self.data_busy.eq(eng.active | eng.pipe_busy),
        ]
        return m
