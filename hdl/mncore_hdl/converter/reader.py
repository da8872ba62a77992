"""The converter's read engine: walks each block's source LWs as bursts into a buffer half."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import addr_bits, max_burst
from .config import config_layout
from .walker import LoopWalker

__all__ = ["ReadEngine"]


class ReadEngine(wiring.Component):
    """Issue every block's read bursts, and write the returning beats into the block's half.

    For each block (outer-table step) it waits until its buffer half is unclaimed, claims it,
    and issues one request per read-table step (``burst`` LWs, clipped to the source footprint;
    a burst wholly outside it is skipped). A FIFO of outstanding bursts routes the returning
    beats, in request order, to consecutive buffer LWs; when a block's last beat is written the
    half is reported full.

    Attributes
    ----------
    cfg : In(config_layout)
        The programmed registers.
    req_valid, req_group, req_addr, req_len, req_ready : Signal
        One read request (absolute Group and address); ``req_ready`` is its port's ``ready``.
    rdata_valid, rdata_data, rdata_error : Signal arrays, in; rdata_ready : out
        The Groups' read-data streams.
    buf_en, buf_addr, buf_data : Signal, out
        Buffer write port.
    claimed : In(2); claim, filled : Out(2)
        Buffer-half state kept by the top: the engine claims a free half before reading into
        it and pulses ``filled`` when all of a block's beats are in.
    """

    def __init__(self, config: ArchConfig, buffer_lw: int, outstanding: int = 8):
        self.config = config
        self.buffer_lw = buffer_lw
        self.half_lw = buffer_lw // 2
        self.outstanding = outstanding
        groups = config.groups
        super().__init__({
            "cfg": In(config_layout(config)),
            "start": In(1),
            "done": Out(1),
            "req_valid": Out(1),
            "req_group": Out(range(groups)),
            "req_addr": Out(addr_bits(config)),
            "req_len": Out(range(max_burst(config) + 1)),
            "req_ready": In(1),
            "rdata_valid": In(1).array(groups),
            "rdata_data": In(config.lw_bits).array(groups),
            "rdata_error": In(1).array(groups),
            "rdata_ready": Out(1).array(groups),
            "buf_en": Out(1),
            "buf_addr": Out(range(buffer_lw)),
            "buf_data": Out(config.lw_bits),
            "claimed": In(2),
            "claim": Out(2),
            "filled": Out(2),
            "beat": Out(1),
            "mem_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        groups = self.config.groups

        # -- walkers: block base (outer table) and burst position (read table) ---------------
        m.submodules.outer = outer = LoopWalker(len(cfg.outer), 2)
        m.submodules.walk = walk = LoopWalker(len(cfg.read), 2)
        m.d.comb += [outer.n.eq(cfg.n_outer), walk.n.eq(cfg.n_read)]
        for k in range(len(cfg.outer)):
            m.d.comb += outer.extent[k].eq(cfg.outer[k].extent)
            m.d.comb += [outer.carry[k][q].eq(cfg.outer[k].carry[q]) for q in range(2)]
        for k in range(len(cfg.read)):
            m.d.comb += walk.extent[k].eq(cfg.read[k].extent)
            m.d.comb += [walk.carry[k][q].eq(cfg.read[k].carry[q]) for q in range(2)]

        # -- outstanding bursts: (group, buffer address, length, last of block, half) --------
        entry = data.StructLayout({
            "group": range(groups), "addr": range(self.buffer_lw),
            "len": range(max_burst(self.config) + 1), "last": 1, "half": 1,
        })
        m.submodules.pending = pending = SyncFIFO(width=entry.size, depth=self.outstanding)

        # -- issue ----------------------------------------------------------------------------
        half = Signal()
        offset = Signal(range(self.half_lw + max_burst(self.config) + 1))
        g_rel = Signal.like(outer.acc[0])
        a_rel = Signal.like(outer.acc[1])
        room = Signal.like(a_rel)
        skip = Signal()
        length = Signal(range(max_burst(self.config) + 1))
        m.d.comb += [
            g_rel.eq(outer.acc[0] + walk.acc[0]),
            a_rel.eq(outer.acc[1] + walk.acc[1]),
            room.eq(cfg.src_lwpg - a_rel),
            skip.eq((g_rel < 0) | (g_rel >= cfg.src_groups) | (a_rel < 0)
                    | (a_rel >= cfg.src_lwpg)),
            length.eq(Mux(room < cfg.burst, room, cfg.burst)),
            self.req_group.eq(cfg.src_group + g_rel),
            self.req_addr.eq(cfg.src_addr + a_rel),
            self.req_len.eq(length),
        ]
        push = data.View(entry, pending.w_data)
        m.d.comb += [
            push.group.eq(self.req_group),
            push.addr.eq(Mux(half, self.half_lw, 0) + offset),
            push.len.eq(Mux(skip, 0, length)),
            push.last.eq(walk.last),
            push.half.eq(half),
        ]
        with m.FSM(name="read_fsm"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.comb += [outer.restart.eq(1), walk.restart.eq(1)]
                    m.d.sync += half.eq(0)
                    m.next = "CLAIM"
            with m.State("CLAIM"):
                with m.If(~self.claimed.bit_select(half, 1)):
                    m.d.comb += self.claim.eq(Mux(half, 0b10, 0b01))
                    m.d.sync += offset.eq(0)
                    m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += self.req_valid.eq(pending.w_rdy & ~skip)
                with m.If(pending.w_rdy & (skip | self.req_ready)):
                    m.d.comb += [pending.w_en.eq(1), walk.advance.eq(1)]
                    m.d.sync += offset.eq(offset + cfg.burst)
                    with m.If(walk.last):
                        m.d.comb += [walk.restart.eq(1), outer.advance.eq(1)]
                        m.d.sync += half.eq(~half)
                        with m.If(outer.last):
                            m.next = "FINISHED"
                        with m.Else():
                            m.next = "CLAIM"
            with m.State("FINISHED"):
                m.d.comb += self.done.eq(~pending.r_rdy)
                with m.If(self.start):
                    m.d.comb += [outer.restart.eq(1), walk.restart.eq(1)]
                    m.d.sync += half.eq(0)
                    m.next = "CLAIM"

        # -- returning beats ------------------------------------------------------------------
        head = data.View(entry, pending.r_data)
        beat = Signal(range(max_burst(self.config) + 1))
        valid = Array(self.rdata_valid)[head.group]
        with m.If(pending.r_rdy):
            with m.If(head.len == 0):
                m.d.comb += pending.r_en.eq(1)
                m.d.comb += self.filled.eq(Mux(head.last, Mux(head.half, 0b10, 0b01), 0))
            with m.Else():
                m.d.comb += Array(self.rdata_ready)[head.group].eq(1)
                with m.If(valid):
                    m.d.comb += [
                        self.buf_en.eq(1),
                        self.buf_addr.eq(head.addr + beat),
                        self.buf_data.eq(Array(self.rdata_data)[head.group]),
                        self.beat.eq(1),
                        self.mem_error.eq(Array(self.rdata_error)[head.group]),
                    ]
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat + 1 == head.len):
                        m.d.sync += beat.eq(0)
                        m.d.comb += pending.r_en.eq(1)
                        m.d.comb += self.filled.eq(Mux(head.last, Mux(head.half, 0b10, 0b01), 0))
        return m
