"""The layout converter top: register file, buffer, engines and Group ports, wired together."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.converter import CONTROL_PORTS, COUNTERS, STATUS_PORTS
from ..memctrl.port import RequesterSignature, max_burst
from .control import BufferHalves, ConverterControl
from .gather import GatherEngine
from .program import DEFAULT_BUFFER_LW, MAX_LANES
from .reader import ReadEngine
from .regfile import RegisterFile
from .router import PortRouter
from .streams import gathered_layout
from .walker import ACC_BITS
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

        # -- registers and checks, control -----------------------------------------------------
        m.submodules.regs = regs = RegisterFile(config, self.buffer_lw)
        m.submodules.control = control = ConverterControl(config.groups, config.groups)
        forward_control(m, self, regs)  # the register bus in, status and counters read back
        for name in STATUS_PORTS.keys() | COUNTERS.keys():
            m.d.comb += getattr(self, name).eq(getattr(control, name))
        m.d.comb += [control.start.eq(regs.start), control.clear.eq(regs.clear),
                     regs.check.eq(control.check), control.checked.eq(regs.checked),
                     control.code.eq(regs.code)]

        # -- engines: one per Group (engine k writes Group k of a split program) -------------
        n = config.groups
        split = Signal()
        m.d.comb += split.eq(regs.cfg.split.extent > 1)
        built = [self._engine(m, k, regs.cfg, control.run) for k in range(n)]
        engines = [parts for parts, _, _ in built]
        self.engines = engines[0]  # for white-box tests: engine 0's (reader, gather, writer)
        self.all_engines = engines

        # -- ports: the router arbitrates each Group's requests and routes the data ------------
        m.submodules.router = router = PortRouter(config, n)
        m.d.comb += [router.split.eq(split), router.dst_group.eq(regs.cfg.dst_group)]
        for g, port in enumerate(self.ports):
            wiring.connect(m, wiring.flipped(port), router.ports[g])
        for e, (reader, _, writer) in enumerate(engines):
            for g in range(config.groups):
                m.d.comb += [router.wdata_valid[e][g].eq(writer.wdata_valid[g]),
                             writer.wdata_ready[g].eq(router.wdata_ready[e][g]),
                             reader.rdata_valid[g].eq(router.rdata_valid[e][g]),
                             reader.rdata_data[g].eq(router.rdata_data[e][g]),
                             reader.rdata_error[g].eq(router.rdata_error[e][g]),
                             router.rdata_ready[e][g].eq(reader.rdata_ready[g])]
                for name in ("valid", "addr", "len"):
                    m.d.comb += getattr(router, f"rd_{name}")[e][g].eq(
                        getattr(reader, f"req_{name}")[g])
                m.d.comb += reader.req_ready[g].eq(router.rd_ready[e][g])
            for name in ("valid", "group", "addr", "len"):
                m.d.comb += getattr(router, f"wr_{name}")[e].eq(getattr(writer, f"req_{name}"))
            m.d.comb += [writer.req_ready.eq(router.wr_ready[e]),
                         router.wdata_data[e].eq(writer.wdata_data)]

        # -- what the control counts and waits for ---------------------------------------------
        readers = [r for r, _, _ in engines]
        writers = [w for _, _, w in engines]
        # every read of every engine is in: no write can wait on a read of its port any more
        reads_in = Signal()
        m.d.comb += reads_in.eq(Cat(*(r for _, _, r in built)).all())
        m.d.comb += [w.assured.eq(reads_in) for w in writers]
        # one engine alone (unsplit): while its gather streams a full block into a Group, that
        # Group's port shows the writer's bursts only, none of the next block's reads
        gather0, writer0 = engines[0][1], engines[0][2]
        m.d.comb += [router.hold[g].eq(~split & gather0.streaming & (writer0.req_group == g))
                     for g in range(config.groups)]
        m.d.comb += [control.engines_done.eq(Cat(*(done for _, done, _ in built)).all()),
                     control.stall.eq(router.stall),
                     control.beats_in.eq(sum(b for r in readers for b in r.beats)),
                     control.beat_written.eq(sum(w.beat for w in writers)),
                     control.mem_error.eq(Cat(*(e for r in readers for e in r.errors)).any())]
        return m

    def _engine(self, m: Module, k: int, cfg, run):
        """Engine ``k``: its read engine, buffer (two halves), gather and write engine.

        It runs when the program uses it (``k`` below the split extent), from the outer base
        ``k * split stride``, writing destination Group ``k`` alone when the program is split
        and every Group otherwise (engine 0 of an unsplit program)."""
        config = self.config
        reader = ReadEngine(config, self.buffer_lw)
        gather = GatherEngine(config, self.buffer_lw)
        writer = WriteEngine(config, self.write_burst)
        produced = SyncFIFO(width=gathered_layout(config).size, depth=8)
        buffer = Memory(shape=unsigned(config.lw_bits), depth=self.buffer_lw, init=[])
        halves = BufferHalves()
        for name, sub in (("reader", reader), ("gather", gather), ("writer", writer),
                          ("produced", produced), ("buffer", buffer), ("halves", halves)):
            m.submodules[name if k == 0 else f"{name}{k}"] = sub
        used = Signal(name=f"engine{k}_used")
        m.d.comb += used.eq(k < cfg.split.extent)
        for engine in (reader, gather, writer):
            m.d.comb += [engine.cfg.eq(cfg), engine.start.eq(run & used)]
        # the outer accumulators' start: k * stride (a constant multiple)
        base = [Signal(signed(ACC_BITS), name=f"engine{k}_base{q}")
                for q in range(len(cfg.split.stride))]
        m.d.comb += [base[q].eq(cfg.split.stride[q] * k) for q in range(len(base))]
        m.d.comb += [reader.base[q].eq(base[q]) for q in range(2)]
        m.d.comb += [gather.base[q].eq(base[2 + q]) for q in range(len(base) - 2)]
        split = cfg.split.extent > 1
        m.d.comb += [writer.group_lo.eq(Mux(split, k, 0)),
                     writer.group_hi.eq(Mux(split, k + 1, cfg.dst_groups))]
        wports = [buffer.write_port() for _ in range(config.groups)]  # one per Group's reads
        rports = [buffer.read_port() for _ in range(MAX_LANES)]
        for g, wport in enumerate(wports):
            m.d.comb += [wport.en.eq(reader.buf_en[g]), wport.addr.eq(reader.buf_addr[g]),
                         wport.data.eq(reader.buf_data[g])]
        for lane in range(MAX_LANES):
            m.d.comb += [rports[lane].addr.eq(gather.buf_addr[lane]),
                         gather.buf_data[lane].eq(rports[lane].data)]
        m.d.comb += [halves.run.eq(run), halves.claim.eq(reader.claim),
                     halves.filled.eq(reader.filled), halves.release.eq(gather.release),
                     reader.claimed.eq(halves.claimed), gather.full.eq(halves.full)]
        # gather -> FIFO -> writer (the gather steps only with room for its pipeline)
        m.d.comb += [
            produced.w_en.eq(gather.out.valid),
            produced.w_data.eq(gather.out.payload),
            gather.out.ready.eq(produced.w_rdy),
            gather.out_space.eq(produced.level + 2 <= produced.depth),
            writer.words.valid.eq(produced.r_rdy),
            writer.words.payload.eq(produced.r_data),
            produced.r_en.eq(writer.words.ready),
            writer.gather_done.eq(gather.done & ~produced.r_rdy),
        ]
        done = Signal(name=f"engine{k}_done")
        m.d.comb += done.eq(~used | (reader.done & gather.done & writer.done))
        reads_in = Signal(name=f"engine{k}_reads_in")
        m.d.comb += reads_in.eq(~used | reader.done)
        return (reader, gather, writer), done, reads_in
