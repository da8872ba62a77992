"""Proof harnesses of the layout converter: a rejected program raises ``error``, touches no
memory; the Group ports and the write engine keep the stream rule."""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Module, ResetSignal, Signal

from ..arch import ArchConfig
from ..contracts.converter import CTRL_START, ErrorCode, Reg
from ..contracts.memctrl import max_burst
from ..converter.converter import LayoutConverter
from ..converter.router import PortRouter
from ..converter.writer import WriteEngine
from .memctrl import PROOF_CONFIG
from .primitives import Assert, Assume, free_inputs
from .streams import held_until_ready, held_until_taken

__all__ = ["CONVERTER_CONFIG", "ConverterErrorProof", "RouterStreamProof", "WriterStreamProof"]

#: Two Groups of the proof's small window: every Group-range rule in few bits.
CONVERTER_CONFIG = PROOF_CONFIG.replace(groups=2)

#: Codes of a program the register file rejects (MEMORY is raised while running).
PROGRAM_ERRORS = tuple(c for c in ErrorCode if c not in (ErrorCode.NONE, ErrorCode.MEMORY))


class ConverterErrorProof(Elaboratable):
    """The converter with its register bus and every port input free.

    Any register may be written any cycle (so every program, legal or not, is reachable given
    enough cycles), ``CTRL.start`` included; the Group ports' ``ready``, ``rdata`` and
    ``error`` are free. Asserted:

    - a run that ends with a programming error (any code but ``MEMORY``) raised no ``req``
      or ``wdata`` valid on any port from its start to its end;
    - a start with an element width other than 16 or 32 ends in ``error`` with code
      ``ELEM_BITS``; one with a burst of 0 or above ``max_burst`` in ``error`` (``ELEM_BITS``
      or ``LOOPS``, the first rule broken) when its run ends;
    - ``req`` or ``wdata`` valid only while ``busy``.

    Parameters
    ----------
    config : ArchConfig
        The converter's geometry.
    buffer_lw : int
        On-chip buffer (small: its contents are state the solver carries).
    """

    def __init__(self, config: ArchConfig = CONVERTER_CONFIG, buffer_lw: int | None = None):
        self.config = config
        self.buffer_lw = 2 * max_burst(config) if buffer_lw is None else buffer_lw

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        dut = _free_converter(m, cfg, self.buffer_lw)
        touches = []
        for port in dut.ports:
            touches += [port.req.valid, port.wdata.valid]
        touch = Signal()
        m.d.comb += touch.eq(Cat(*touches).any())
        m.d.comb += Assert(~touch | dut.busy, "memory request while the converter is idle")

        # -- the registers the spec checks below read, shadowed from the bus ----------------
        write = dut.reg_we & ~dut.busy
        elem_bits = Signal(32)
        burst = Signal(32)
        with m.If(write & (dut.reg_addr == Reg.ELEM_BITS)):
            m.d.sync += elem_bits.eq(dut.reg_wdata)
        with m.If(write & (dut.reg_addr == Reg.BURST)):
            m.d.sync += burst.eq(dut.reg_wdata)
        start = write & (dut.reg_addr == Reg.CTRL) & (dut.reg_wdata & CTRL_START).any()

        # -- per run: what it touched, what its program broke -------------------------------
        touched = Signal()
        bad_elem = Signal()
        bad_burst = Signal()
        with m.If(start):
            m.d.sync += [touched.eq(0),
                         bad_elem.eq((elem_bits != 16) & (elem_bits != 32)),
                         bad_burst.eq((burst == 0) | (burst > max_burst(cfg)))]
        with m.Elif(touch):
            m.d.sync += touched.eq(1)
        ended = Signal()
        was_busy = Signal()
        m.d.sync += was_busy.eq(dut.busy)
        m.d.comb += ended.eq(was_busy & ~dut.busy)
        program_error = Cat(dut.error_code == c for c in PROGRAM_ERRORS).any()
        m.d.comb += [
            Assert(~(ended & dut.error & program_error) | ~touched,
                   "a rejected program touched memory"),
            Assert(~(ended & bad_elem) | (dut.error & (dut.error_code == ErrorCode.ELEM_BITS)),
                   "a bad element width did not raise ELEM_BITS"),
            Assert(~(ended & bad_burst) | (dut.error & ((dut.error_code == ErrorCode.ELEM_BITS)
                                                        | (dut.error_code == ErrorCode.LOOPS))),
                   "a bad burst did not raise LOOPS"),
        ]
        return m


def _free_converter(m: Module, config: ArchConfig, buffer_lw: int) -> LayoutConverter:
    """The converter (submodule ``dut``) with its register bus and every port input free."""
    m.submodules.dut = dut = LayoutConverter(config, buffer_lw, write_burst=2)
    free_inputs(m, dut)
    m.d.comb += Assume(~ResetSignal())
    return dut


class RouterStreamProof(Elaboratable):
    """The converter's :class:`~..converter.router.PortRouter` keeps the stream rule on every
    Group port, given engines that keep it on theirs.

    Every input free each cycle; assumed: each engine's write request (valid, Group, address,
    length), its read request for each Group (valid, address, length) and its write beat for
    each Group (valid, the engine's data) hold until their ready, as the engines' FIFOs and
    registers keep them, and ``split`` holds (a register, written only while the converter is
    idle). Asserted on each port's ``req`` and ``wdata``: valid and payload hold until ready.
    The router merges every engine's reads and one engine's writes onto one port, the one
    place the converter could break the rule while its engines keep it; k-induction closes.

    Parameters
    ----------
    config : ArchConfig
        The Groups and widths (one engine per Group).
    """

    def __init__(self, config: ArchConfig = CONVERTER_CONFIG):
        self.config = config

    def elaborate(self, platform):
        m = Module()
        m.submodules.router = router = PortRouter(self.config, self.config.groups)
        free_inputs(m, router)
        m.d.comb += Assume(~ResetSignal())
        was = Signal(len(Cat(router.split, router.dst_group)))
        m.d.sync += was.eq(Cat(router.split, router.dst_group))
        started = Signal()
        m.d.sync += started.eq(1)
        m.d.comb += Assume(~started | (Cat(router.split, router.dst_group) == was))
        for e in range(router.engines):
            held_until_taken(m, router.wr_valid[e], router.wr_ready[e],
                             Cat(router.wr_group[e], router.wr_addr[e], router.wr_len[e]),
                             f"wr{e}_req", Assume)
            for g in range(self.config.groups):
                held_until_taken(m, router.rd_valid[e][g], router.rd_ready[e][g],
                                 Cat(router.rd_addr[e][g], router.rd_len[e][g]),
                                 f"rd{e}_{g}_req", Assume)
                held_until_taken(m, router.wdata_valid[e][g], router.wdata_ready[e][g],
                                 router.wdata_data[e], f"wdata{e}_{g}", Assume)
        for g, port in enumerate(router.ports):
            held_until_ready(m, port.req, f"group{g}_req", Assert)
            held_until_ready(m, port.wdata, f"group{g}_wdata", Assert)
        return m


class WriterStreamProof(Elaboratable):
    """The converter's :class:`~..converter.writer.WriteEngine` keeps the stream rule on its
    write requests and write beats, the rule :class:`RouterStreamProof` assumes of it.

    Every input free each cycle, but as the converter drives them: the programmed registers
    and the Group range hold (written only while idle) and describe a destination the register
    file accepts, ``start`` comes only before the first
    run or once the writer is ``done``, and ``assured`` (the read engine is done) stays high
    until the next ``start``. Asserted: the request (valid, Group, address, length) and each
    Group's write beat (valid, data) hold until their ready, also when requests go ahead of
    their beats.

    Parameters
    ----------
    config : ArchConfig
        The Groups and widths.
    writer : callable
        Builds the writer under proof from ``(config, burst)`` (a mutant test passes a broken
        one); default :class:`~mncore_hdl.converter.writer.WriteEngine`.
    """

    def __init__(self, config: ArchConfig = CONVERTER_CONFIG, writer=WriteEngine):
        self.config = config
        self.writer = writer

    def elaborate(self, platform):
        m = Module()
        m.submodules.writer = w = self.writer(self.config, 2)
        free_inputs(m, w)
        m.d.comb += Assume(~ResetSignal())
        fixed = Cat(w.cfg.as_value(), w.group_lo, w.group_hi)
        was = Signal(len(fixed))
        started = Signal()
        ran = Signal()
        was_assured = Signal()
        was_start = Signal()
        m.d.sync += [was.eq(fixed), started.eq(1), ran.eq(ran | w.start),
                     was_assured.eq(w.assured), was_start.eq(w.start)]
        cfg = w.cfg
        m.d.comb += [
            Assume(~started | (fixed == was)),
            # a destination the register file accepts, and this engine's Groups of it
            Assume((cfg.dst_lwpg != 0) & (cfg.dst_groups != 0)
                   & (cfg.dst_group + cfg.dst_groups <= self.config.groups)
                   & (cfg.dst_addr + cfg.dst_lwpg <= self.config.sim_window_lw)),
            Assume((w.group_lo < w.group_hi) & (w.group_hi <= cfg.dst_groups)),
            Assume(~w.start | ~ran | w.done),
            Assume(~was_assured | w.assured | was_start),
        ]
        held_until_taken(m, w.req_valid, w.req_ready, Cat(w.req_group, w.req_addr, w.req_len),
                         "wr_req", Assert)
        for g in range(self.config.groups):
            held_until_taken(m, w.wdata_valid[g], w.wdata_ready[g], w.wdata_data,
                             f"wdata{g}", Assert)
        return m
