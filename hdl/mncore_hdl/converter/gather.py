"""The converter's gather engine: destination LWs from a full buffer half, lanes in parallel."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .config import config_layout
from .program import MAX_AXES, MAX_LANES
from .streams import gathered_signature
from .walker import ACC_BITS, LoopWalker

__all__ = ["GatherEngine"]


class GatherEngine(wiring.Component):
    """Walk each block's destination LWs and gather their lanes from the buffer.

    One destination LW per cycle: in stage 0 every lane computes the buffer element it takes
    (gather position + lane offset) and whether its logical index is inside the shape; the
    buffer's ``MAX_LANES`` read ports return the source LWs in stage 1, where the lanes are
    selected, masked and packed. LWs whose lanes are all padding are dropped (the writer fills
    them with zeros). The engine only steps while the output FIFO has room for what is in flight.

    Attributes
    ----------
    buf_addr : Out array; buf_data : In array
        The buffer read ports (one-cycle latency).
    out : Out(gathered_signature(config)); out_space : In
        The produced LWs (Group and address relative to the destination base) and whether two
        more entries fit downstream. The engine's flow control is ``out_space``, one cycle
        ahead of its pipeline: it only offers a word the FIFO has room for, so ``out.ready``
        is always high when ``out.valid`` is and the engine does not read it.
    full : In(2); release : Out(2)
        Buffer halves ready to gather; pulse when a half has been read completely.
    streaming : Out(1)
        Walking a full half: every LW it still gives before ``release`` is in the buffer.
    base : In array (source lane, destination Group and address, logical indices)
        The outer accumulators' start (this engine's share of a split program; zero on one).
    """

    def __init__(self, config: ArchConfig, buffer_lw: int):
        self.config = config
        self.buffer_lw = buffer_lw
        self.half_lw = buffer_lw // 2
        super().__init__({
            "cfg": In(config_layout(config)),
            "base": In(signed(ACC_BITS)).array(3 + MAX_AXES),
            "start": In(1),
            "done": Out(1),
            "buf_addr": Out(range(buffer_lw)).array(MAX_LANES),
            "buf_data": In(config.lw_bits).array(MAX_LANES),
            "out": Out(gathered_signature(config)),
            "out_space": In(1),
            "full": In(2),
            "release": Out(2),
            "streaming": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        nq_outer = len(cfg.outer[0].carry) - 2  # skip the source Group and address
        nq_gather = len(cfg.gather[0].carry)

        # -- walkers: outer (src lane, dst group, dst addr, logs) and gather -----------------
        m.submodules.outer = outer = LoopWalker(len(cfg.outer), nq_outer)
        m.submodules.walk = walk = LoopWalker(len(cfg.gather), nq_gather)
        m.d.comb += [outer.n.eq(cfg.n_outer), walk.n.eq(cfg.n_gather)]
        for k in range(len(cfg.outer)):
            m.d.comb += outer.extent[k].eq(cfg.outer[k].extent)
            m.d.comb += [outer.carry[k][q].eq(cfg.outer[k].carry[q + 2]) for q in range(nq_outer)]
        for k in range(len(cfg.gather)):
            m.d.comb += walk.extent[k].eq(cfg.gather[k].extent)
            m.d.comb += [walk.carry[k][q].eq(cfg.gather[k].carry[q]) for q in range(nq_gather)]
        o_acc = [Signal(signed(ACC_BITS), name=f"o_acc{q}") for q in range(nq_outer)]
        m.d.comb += [o_acc[q].eq(self.base[q] + outer.acc[q]) for q in range(nq_outer)]
        o_lane, o_group, o_addr = o_acc[0], o_acc[1], o_acc[2]
        o_log = [o_acc[3 + ax] for ax in range(MAX_AXES)]
        w_elem, w_addr = walk.acc[0], walk.acc[1]
        w_log = [walk.acc[2 + ax] for ax in range(MAX_AXES)]

        wide = Signal()  # 32-bit elements: two lanes per LW
        m.d.comb += wide.eq(cfg.elem_bits == 32)

        # -- stage 0: addresses and masks ---------------------------------------------------
        half = Signal()
        step = Signal()
        base = Signal(signed(ACC_BITS))
        m.d.comb += base.eq(Mux(half, self.half_lw, 0) * Mux(wide, 2, 4) + o_lane + w_elem)
        s1_valid = Signal()
        s1_group = Signal(signed(ACC_BITS))
        s1_addr = Signal(signed(ACC_BITS))
        s1_sub = [Signal(2, name=f"s1_sub{lane}") for lane in range(MAX_LANES)]
        s1_use = [Signal(name=f"s1_use{lane}") for lane in range(MAX_LANES)]
        for lane in range(MAX_LANES):
            entry = cfg.lanes[lane]
            elem = Signal(signed(ACC_BITS), name=f"elem{lane}")
            inside = Signal(name=f"inside{lane}")
            m.d.comb += elem.eq(base + entry.elem)
            checks = [o_log[ax] + w_log[ax] + entry.log[ax] < cfg.dims[ax]
                      for ax in range(MAX_AXES)]
            m.d.comb += inside.eq(Cat(*checks).all() & entry.valid
                                  & ((lane < 2) | ~wide))
            m.d.comb += self.buf_addr[lane].eq(Mux(wide, elem >> 1, elem >> 2))
            with m.If(step):
                m.d.sync += [
                    s1_sub[lane].eq(Mux(wide, elem[0], elem[:2])),
                    s1_use[lane].eq(inside),
                ]
        m.d.sync += s1_valid.eq(step)
        with m.If(step):
            m.d.sync += [s1_group.eq(o_group), s1_addr.eq(o_addr + w_addr)]

        with m.FSM(name="gather_fsm"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.comb += [outer.restart.eq(1), walk.restart.eq(1)]
                    m.d.sync += half.eq(0)
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(self.full.bit_select(half, 1)):
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.streaming.eq(1)
                with m.If(self.out_space):
                    m.d.comb += [step.eq(1), walk.advance.eq(1)]
                    with m.If(walk.last):
                        m.d.comb += [walk.restart.eq(1), outer.advance.eq(1)]
                        m.d.comb += self.release.eq(Mux(half, 0b10, 0b01))
                        m.d.sync += half.eq(~half)
                        with m.If(outer.last):
                            m.next = "FINISHED"
                        with m.Else():
                            m.next = "WAIT"
            with m.State("FINISHED"):
                m.d.comb += self.done.eq(~s1_valid)
                with m.If(self.start):
                    m.d.comb += [outer.restart.eq(1), walk.restart.eq(1)]
                    m.d.sync += half.eq(0)
                    m.next = "WAIT"

        # -- stage 1: select, mask and pack lanes ---------------------------------------------
        narrow_lanes = []
        wide_lanes = []
        for lane in range(MAX_LANES):
            word = self.buf_data[lane]
            narrow_lanes.append(Mux(s1_use[lane], word.word_select(s1_sub[lane], 16), 0))
            if lane < 2:
                wide_lanes.append(Mux(s1_use[lane], word.word_select(s1_sub[lane][0], 32), 0))
        m.d.comb += [
            self.out.valid.eq(s1_valid & Cat(*s1_use).any()),
            self.out.payload.group.eq(s1_group),
            self.out.payload.addr.eq(s1_addr),
            self.out.payload.data.eq(Mux(wide, Cat(*wide_lanes), Cat(*narrow_lanes))),
        ]
        return m
