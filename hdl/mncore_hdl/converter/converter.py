"""The layout converter top: register file, buffer, engines and Group ports, wired together."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.converter import CONTROL_PORTS, ErrorCode
from ..memctrl.port import RequesterSignature, max_burst
from .gather import GatherEngine
from .program import DEFAULT_BUFFER_LW, MAX_LANES
from .reader import ReadEngine
from .regfile import RegisterFile
from .writer import WriteEngine

__all__ = ["LayoutConverter", "CONTROL_MEMBERS", "forward_control"]

#: The converter's register bus, status and counters (``contracts.converter.CONTROL_PORTS``).
#: Every design that embeds the converter re-exports them under these same flat names, so
#: testbenches and waveforms find ``busy``, ``done``, ``beats_read``... at its top.
CONTROL_MEMBERS = {name: In(bits) if direction == "in" else Out(bits)
                   for name, (direction, bits) in CONTROL_PORTS.items()}


def forward_control(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Wire ``outer``'s CONTROL_MEMBERS to ``inner``'s: into ``inner``'s inputs, out of its
    outputs (so ``inner`` may be the converter itself, or its register file)."""
    for name in CONTROL_MEMBERS:
        if inner.signature.members[name].flow == wiring.In:
            m.d.comb += getattr(inner, name).eq(getattr(outer, name))
        else:
            m.d.comb += getattr(outer, name).eq(getattr(inner, name))


class LayoutConverter(wiring.Component):
    """DRAM-to-DRAM layout converter with one requester port into each Group's controller.

    Program it through the register bus (the map: :mod:`mncore_hdl.contracts.converter`;
    :func:`.program.compile_program` and :func:`.regmap.registers` compute the values from a
    ``ConversionDescriptor``), then write ``CTRL.start``. Its :class:`.regfile.RegisterFile`
    first checks the program (a few cycles; on a violation it raises ``error`` with a reason
    code and touches no memory), then the engines read the source block by block
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

    def elaborate(self, platform):
        m = Module()
        config = self.config

        # -- registers and checks ------------------------------------------------------------
        m.submodules.regs = regs = RegisterFile(config, self.buffer_lw)
        forward_control(m, self, regs)  # the register bus in, status and counters read back
        cfg = regs.cfg
        running = Signal()
        start_run = Signal()

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
                with m.If(regs.start):
                    m.d.comb += regs.check.eq(1)
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0),
                                 self.beats_read.eq(0), self.beats_written.eq(0),
                                 self.stall_cycles.eq(0), self.busy_cycles.eq(0), running.eq(1)]
                    m.next = "CHECK"
                with m.Elif(regs.clear):
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0)]
            with m.State("CHECK"):
                with m.If(regs.checked):
                    with m.If(regs.code != 0):
                        m.d.sync += [self.error.eq(1), self.error_code.eq(regs.code),
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
