"""The layout converter top: registers, descriptor checks, buffer, engines and Group ports."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature, max_burst
from .config import config_layout
from .gather import GatherEngine
from .program import DEFAULT_BUFFER_LW, MAX_LANES, MAX_LOOPS
from .reader import ReadEngine
from .regmap import (
    GATHER_BASE,
    GATHER_STRIDE,
    LANE_BASE,
    LANE_STRIDE,
    OUTER_BASE,
    OUTER_STRIDE,
    READ_BASE,
    READ_STRIDE,
    REG_ADDR_BITS,
    REG_BITS,
    ErrorCode,
    Reg,
)
from .writer import WriteEngine

__all__ = ["LayoutConverter", "CONTROL_MEMBERS", "forward_control"]

#: The converter's register bus, status and counters. Every design that embeds the converter
#: re-exports them under these same flat names, so testbenches and waveforms find ``busy``,
#: ``done``, ``beats_read``... at its top.
CONTROL_MEMBERS = {
    "reg_addr": In(REG_ADDR_BITS),
    "reg_wdata": In(REG_BITS),
    "reg_we": In(1),
    "reg_rdata": Out(REG_BITS),
    "busy": Out(1),
    "done": Out(1),
    "error": Out(1),
    "error_code": Out(4),
    "beats_read": Out(32),
    "beats_written": Out(32),
    "stall_cycles": Out(32),
    "busy_cycles": Out(32),
}


def forward_control(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Wire ``outer``'s CONTROL_MEMBERS to ``inner``'s: inputs inward, outputs outward."""
    for name, member in CONTROL_MEMBERS.items():
        if member.flow == wiring.In:
            m.d.comb += getattr(inner, name).eq(getattr(outer, name))
        else:
            m.d.comb += getattr(outer, name).eq(getattr(inner, name))


class LayoutConverter(wiring.Component):
    """DRAM-to-DRAM layout converter with one requester port into each Group's controller.

    Program it through the register bus (``regmap``; :func:`.program.compile_program` and
    :func:`.regmap.registers` compute the values from a ``ConversionDescriptor``), then write
    ``CTRL.start``. It first checks the program (a few cycles; on a violation it raises
    ``error`` with a reason code and touches no memory), then reads the source block by block
    into one half of an on-chip buffer while it gathers the previous block from the other half
    and writes the destination as bursts.

    Parameters
    ----------
    config : ArchConfig
        The only source of geometry.
    buffer_lw : int
        On-chip buffer in LWs (a power of two, two halves: one filling, one draining).
    write_burst : int
        Longest write burst in LWs.

    Attributes
    ----------
    ports : Out(RequesterSignature(config)).array(config.groups)
        Requester port ``i`` goes to Group ``i``'s controller.
    reg_addr, reg_wdata, reg_we, reg_rdata : Signal
        Register bus: a write takes effect at the clock edge, ``reg_rdata`` shows the register at
        ``reg_addr`` combinationally.
    busy, done, error, error_code : Signal, out
        ``done`` and ``error`` are sticky until the next start or ``CTRL.clear``.
    beats_read, beats_written, stall_cycles, busy_cycles : Signal(32), out
        Counters, cleared by start. A stall cycle is a busy cycle on which some request or write
        beat the converter offers is refused by its port.
    """

    def __init__(self, config: ArchConfig, buffer_lw: int = DEFAULT_BUFFER_LW,
                 write_burst: int = 32):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        if isinstance(buffer_lw, bool) or not isinstance(buffer_lw, int):
            raise TypeError(f"Buffer size must be an integer, not {buffer_lw!r}")
        if buffer_lw < 2 * max_burst(config) or buffer_lw & (buffer_lw - 1):
            raise ValueError(
                f"Buffer size must be a power of two of at least {2 * max_burst(config)} LW "
                f"(two halves of one DRAM row), not {buffer_lw}"
            )
        if isinstance(write_burst, bool) or not isinstance(write_burst, int):
            raise TypeError(f"Write burst must be an integer, not {write_burst!r}")
        if not 1 <= write_burst <= max_burst(config):
            raise ValueError(
                f"Write burst must be between 1 and {max_burst(config)}, not {write_burst}"
            )
        self.config = config
        self.buffer_lw = buffer_lw
        self.write_burst = write_burst
        super().__init__({
            "ports": Out(RequesterSignature(config)).array(config.groups),
            **CONTROL_MEMBERS,
        })

    # -- register file -----------------------------------------------------------------------

    def _registers(self, m, cfg):
        """Map every writable field to its address; return (address, signal) pairs."""
        regs = [
            (Reg.ELEM_BITS, cfg.elem_bits), (Reg.SRC_GROUP, cfg.src_group),
            (Reg.SRC_ADDR, cfg.src_addr), (Reg.SRC_GROUPS, cfg.src_groups),
            (Reg.SRC_LWPG, cfg.src_lwpg), (Reg.DST_GROUP, cfg.dst_group),
            (Reg.DST_ADDR, cfg.dst_addr), (Reg.DST_GROUPS, cfg.dst_groups),
            (Reg.DST_LWPG, cfg.dst_lwpg), (Reg.N_OUTER, cfg.n_outer), (Reg.N_READ, cfg.n_read),
            (Reg.N_GATHER, cfg.n_gather), (Reg.BURST, cfg.burst),
        ]
        regs += [(Reg.DIM0 + i, dim) for i, dim in enumerate(cfg.dims)]
        for base, stride, table in ((OUTER_BASE, OUTER_STRIDE, cfg.outer),
                                    (READ_BASE, READ_STRIDE, cfg.read),
                                    (GATHER_BASE, GATHER_STRIDE, cfg.gather)):
            for k in range(len(table)):
                regs.append((base + stride * k, table[k].extent))
                regs += [(base + stride * k + 1 + q, table[k].carry[q])
                         for q in range(len(table[k].carry))]
        for lane in range(MAX_LANES):
            entry = cfg.lanes[lane]
            base = LANE_BASE + LANE_STRIDE * lane
            regs += [(base, entry.valid), (base + 1, entry.elem)]
            regs += [(base + 2 + ax, entry.log[ax]) for ax in range(len(entry.log))]
        return [(int(a), s) for a, s in regs]

    def elaborate(self, platform):
        m = Module()
        config = self.config
        groups = config.groups
        cfg = Signal(config_layout(config))

        running = Signal()
        start_run = Signal()
        status = Cat(self.busy, self.done, self.error, Const(0, 5), self.error_code)
        regs = self._registers(m, cfg)
        counters = [(Reg.BEATS_READ, self.beats_read), (Reg.BEATS_WRITTEN, self.beats_written),
                    (Reg.STALL_CYCLES, self.stall_cycles), (Reg.BUSY_CYCLES, self.busy_cycles)]
        start = Signal()
        clear = Signal()
        with m.Switch(self.reg_addr):
            for addr, sig in regs:
                with m.Case(addr):
                    m.d.comb += self.reg_rdata.eq(Value.cast(sig)[:REG_BITS])
                    with m.If(self.reg_we & ~self.busy):
                        m.d.sync += sig.eq(self.reg_wdata)
            with m.Case(Reg.STATUS):
                m.d.comb += self.reg_rdata.eq(status)
            for addr, sig in counters:
                with m.Case(addr):
                    m.d.comb += self.reg_rdata.eq(sig)
            with m.Case(Reg.CTRL):
                m.d.comb += [start.eq(self.reg_we & self.reg_wdata[0]),
                             clear.eq(self.reg_we & self.reg_wdata[1])]

        # -- descriptor checks (CHECK state) --------------------------------------------------
        window = config.sim_window_lw
        half = self.buffer_lw // 2
        code = Signal(4)
        product = Signal(64)
        check_step = Signal(range(MAX_LOOPS + 1))
        too_many = ((cfg.n_outer > MAX_LOOPS) | (cfg.n_read > MAX_LOOPS)
                    | (cfg.n_gather > MAX_LOOPS) | (cfg.burst == 0)
                    | (cfg.burst > max_burst(config)))
        for n, table in ((cfg.n_outer, cfg.outer), (cfg.n_read, cfg.read),
                         (cfg.n_gather, cfg.gather)):
            for k in range(len(table)):
                too_many = too_many | ((k < n) & (table[k].extent == 0))

        def bad_range(group, addr, ngroups, lwpg):
            return ((ngroups == 0) | (lwpg == 0) | (group + ngroups > groups)
                    | (addr + lwpg > window))

        overlap = ((cfg.src_group < cfg.dst_group + cfg.dst_groups)
                   & (cfg.dst_group < cfg.src_group + cfg.src_groups)
                   & (cfg.src_addr < cfg.dst_addr + cfg.dst_lwpg)
                   & (cfg.dst_addr < cfg.src_addr + cfg.src_lwpg))
        with m.If((cfg.elem_bits != 16) & (cfg.elem_bits != 32)):
            m.d.comb += code.eq(ErrorCode.ELEM_BITS)
        with m.Elif(too_many):
            m.d.comb += code.eq(ErrorCode.LOOPS)
        with m.Elif(bad_range(cfg.src_group, cfg.src_addr, cfg.src_groups, cfg.src_lwpg)):
            m.d.comb += code.eq(ErrorCode.SRC_RANGE)
        with m.Elif(bad_range(cfg.dst_group, cfg.dst_addr, cfg.dst_groups, cfg.dst_lwpg)):
            m.d.comb += code.eq(ErrorCode.DST_RANGE)
        with m.Elif(product > half):
            m.d.comb += code.eq(ErrorCode.BUFFER)
        with m.Elif(overlap):
            m.d.comb += code.eq(ErrorCode.OVERLAP)

        # -- engines and buffer ----------------------------------------------------------------
        m.submodules.reader = reader = ReadEngine(config, self.buffer_lw)
        m.submodules.gather = gather = GatherEngine(config, self.buffer_lw)
        m.submodules.writer = writer = WriteEngine(config, self.write_burst)
        self.engines = (reader, gather, writer)  # for white-box tests
        m.submodules.produced = produced = SyncFIFO(
            width=config.lw_bits + 2 * 32, depth=8)
        m.submodules.buffer = buffer = Memory(shape=unsigned(config.lw_bits),
                                              depth=self.buffer_lw, init=[])
        wport = buffer.write_port()
        rports = [buffer.read_port() for _ in range(MAX_LANES)]
        for engine in (reader, gather, writer):
            m.d.comb += [engine.cfg.eq(cfg), engine.start.eq(start_run)]
        m.d.comb += [wport.en.eq(reader.buf_en), wport.addr.eq(reader.buf_addr),
                     wport.data.eq(reader.buf_data)]
        for lane in range(MAX_LANES):
            m.d.comb += [rports[lane].addr.eq(gather.buf_addr[lane]),
                         gather.buf_data[lane].eq(rports[lane].data)]

        claimed = Signal(2)
        full = Signal(2)
        m.d.sync += [
            claimed.eq((claimed | reader.claim) & ~gather.release),
            full.eq((full | reader.filled) & ~gather.release),
        ]
        m.d.comb += [reader.claimed.eq(claimed), gather.full.eq(full)]
        with m.If(start_run):
            m.d.sync += [claimed.eq(0), full.eq(0)]

        # gather -> FIFO -> writer (the gather steps only with room for its pipeline)
        m.d.comb += [
            produced.w_en.eq(gather.out_valid),
            produced.w_data.eq(Cat(gather.out_data, gather.out_group[:32], gather.out_addr[:32])),
            gather.out_space.eq(produced.level + 2 <= produced.depth),
            writer.in_valid.eq(produced.r_rdy),
            writer.in_data.eq(produced.r_data[:config.lw_bits]),
            writer.in_group.eq(produced.r_data[config.lw_bits:config.lw_bits + 32].as_signed()),
            writer.in_addr.eq(produced.r_data[config.lw_bits + 32:].as_signed()),
            produced.r_en.eq(writer.in_ready),
            writer.gather_done.eq(gather.done & ~produced.r_rdy),
        ]

        # -- ports: requests arbitrated per Group (writes first), data streams routed ----------
        stall = Signal()
        stalls = []
        for i, port in enumerate(self.ports):
            wr_here = writer.req_valid & (writer.req_group == i)
            rd_here = reader.req_valid & (reader.req_group == i) & ~wr_here
            m.d.comb += [
                port.req.valid.eq(wr_here | rd_here),
                port.req.p.write.eq(wr_here),
                port.req.p.addr.eq(Mux(wr_here, writer.req_addr, reader.req_addr)),
                port.req.p.length.eq(Mux(wr_here, writer.req_len, reader.req_len)),
                port.wdata.valid.eq(writer.wdata_valid[i]),
                port.wdata.p.data.eq(writer.wdata_data),
                port.wdata.p.strb.eq(-1),
                writer.wdata_ready[i].eq(port.wdata.ready),
                reader.rdata_valid[i].eq(port.rdata.valid),
                reader.rdata_data[i].eq(port.rdata.p.data),
                reader.rdata_error[i].eq(port.rdata.p.error),
                port.rdata.ready.eq(reader.rdata_ready[i]),
            ]
            with m.If(wr_here):
                m.d.comb += writer.req_ready.eq(port.req.ready)
            with m.If(rd_here):
                m.d.comb += reader.req_ready.eq(port.req.ready)
            stalls.append((port.req.valid & ~port.req.ready)
                          | (port.wdata.valid & ~port.wdata.ready))
        m.d.comb += stall.eq(Cat(*stalls).any())

        # -- control and counters ----------------------------------------------------------------
        m.d.comb += self.busy.eq(running)
        with m.FSM(name="control"):
            with m.State("IDLE"):
                with m.If(start):
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0),
                                 product.eq(cfg.burst), check_step.eq(0),
                                 self.beats_read.eq(0), self.beats_written.eq(0),
                                 self.stall_cycles.eq(0), self.busy_cycles.eq(0), running.eq(1)]
                    m.next = "CHECK"
                with m.Elif(clear):
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0)]
            with m.State("CHECK"):
                # The buffer check multiplies the read extents in, one per cycle, saturating.
                extent = cfg.read[0].extent
                for k in range(1, MAX_LOOPS):
                    extent = Mux(check_step == k, cfg.read[k].extent, extent)
                with m.If(check_step < cfg.n_read):
                    m.d.sync += product.eq(Mux(product > half, product, product * extent))
                m.d.sync += check_step.eq(check_step + 1)
                with m.If(check_step == MAX_LOOPS):
                    with m.If(code != 0):
                        m.d.sync += [self.error.eq(1), self.error_code.eq(code),
                                     self.done.eq(1), running.eq(0)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += start_run.eq(1)
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
                m.d.sync += self.stall_cycles.eq(self.stall_cycles + stall)
                with m.If(reader.done & gather.done & writer.done):
                    m.d.sync += [self.done.eq(1), running.eq(0)]
                    m.next = "IDLE"
        with m.If(reader.beat):
            m.d.sync += self.beats_read.eq(self.beats_read + 1)
        with m.If(writer.beat):
            m.d.sync += self.beats_written.eq(self.beats_written + 1)
        with m.If(reader.mem_error & ~self.error):
            m.d.sync += [self.error.eq(1), self.error_code.eq(ErrorCode.MEMORY)]
        return m
