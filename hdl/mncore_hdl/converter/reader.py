"""The converter's read engine: each block's source LWs as bursts, one read stream per Group."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import addr_bits, max_burst
from .config import config_layout
from .program import READ_OUTSTANDING, READ_QUEUED
from .walker import ACC_BITS, LoopWalker

__all__ = ["ReadEngine", "QUEUED", "OUTSTANDING"]

#: Read bursts the walk may queue per Group ahead of that Group's port.
QUEUED = READ_QUEUED
#: Read bursts each Group's port may have outstanding (requested, beats not all in).
OUTSTANDING = READ_OUTSTANDING


class ReadEngine(wiring.Component):
    """Issue every block's read bursts, and write the returning beats into the block's half.

    For each block (outer-table step) it waits until its buffer half is unclaimed, claims it,
    and walks the read table: each burst (``burst`` LWs, clipped to the source footprint; a
    burst wholly outside it is skipped) goes into its Group's queue of ``QUEUED`` requests, so
    a Group whose port is busy (the writer streaming into it) holds up only its own reads; the
    walk stops only when the queue of the burst's Group is full. Each Group's port has up to
    ``OUTSTANDING`` bursts in flight and returns their beats in its own request order, into the
    buffer through a write port of its own (the bursts of one block never overlap in the
    buffer), so every Group's reads drain at one LW a cycle at once. A half is reported full
    once its block's walk has ended and its last burst is in, whichever Group that was.

    Attributes
    ----------
    cfg : In(config_layout)
        The programmed registers.
    base : In array (source Group, source address)
        The outer accumulators' start: this engine's share of a split program
        (``program.engine_bases``), zero on a single engine.
    req_valid, req_addr, req_len : Out arrays; req_ready : In array
        One read request per Group port (absolute address); ``req_ready`` is its port's ``ready``.
    rdata_valid, rdata_data, rdata_error : Signal arrays, in; rdata_ready : out
        The Groups' read-data streams.
    beats, errors : Out arrays
        A Group's beat is taken this cycle (and flagged by its controller).
    buf_en, buf_addr, buf_data : Out arrays
        One buffer write port per Group.
    claimed : In(2); claim, filled : Out(2)
        Buffer-half state kept by the top: the engine claims a free half before reading into
        it and pulses ``filled`` when all of a block's beats are in.
    """

    def __init__(self, config: ArchConfig, buffer_lw: int):
        self.config = config
        self.buffer_lw = buffer_lw
        self.half_lw = buffer_lw // 2
        groups = config.groups
        super().__init__({
            "cfg": In(config_layout(config)),
            "base": In(signed(ACC_BITS)).array(2),
            "start": In(1),
            "done": Out(1),
            "req_valid": Out(1).array(groups),
            "req_addr": Out(addr_bits(config)).array(groups),
            "req_len": Out(range(max_burst(config) + 1)).array(groups),
            "req_ready": In(1).array(groups),
            "rdata_valid": In(1).array(groups),
            "rdata_data": In(config.lw_bits).array(groups),
            "rdata_error": In(1).array(groups),
            "rdata_ready": Out(1).array(groups),
            "buf_en": Out(1).array(groups),
            "buf_addr": Out(range(buffer_lw)).array(groups),
            "buf_data": Out(config.lw_bits).array(groups),
            "claimed": In(2),
            "claim": Out(2),
            "filled": Out(2),
            "beats": Out(1).array(groups),
            "errors": Out(1).array(groups),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        groups = self.config.groups
        burst_len = range(max_burst(self.config) + 1)

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

        # -- per Group: queued requests, then bursts in flight --------------------------------
        flight = data.StructLayout({"buf": range(self.buffer_lw), "len": burst_len, "half": 1})
        queued = data.StructLayout({"addr": addr_bits(self.config), "flight": flight})
        queues, flights = [], []
        for g in range(groups):
            q = SyncFIFO(width=queued.size, depth=QUEUED)
            f = SyncFIFO(width=flight.size, depth=OUTSTANDING)
            m.submodules[f"queue{g}"], m.submodules[f"flight{g}"] = q, f
            queues.append(q)
            flights.append(f)
            head = data.View(queued, q.r_data)
            m.d.comb += [
                self.req_valid[g].eq(q.r_rdy & f.w_rdy),
                self.req_addr[g].eq(head.addr),
                self.req_len[g].eq(head.flight.len),
                f.w_data.eq(head.flight.as_value()),
                f.w_en.eq(self.req_valid[g] & self.req_ready[g]),
                q.r_en.eq(f.w_en),
            ]

        # -- the walk: one burst a cycle into its Group's queue -------------------------------
        half = Signal()
        offset = Signal(range(self.half_lw + max_burst(self.config) + 1))
        g_rel = Signal.like(outer.acc[0])
        a_rel = Signal.like(outer.acc[1])
        room = Signal.like(a_rel)
        skip = Signal()
        length = Signal(burst_len)
        group = Signal(range(groups))
        m.d.comb += [
            g_rel.eq(self.base[0] + outer.acc[0] + walk.acc[0]),
            a_rel.eq(self.base[1] + outer.acc[1] + walk.acc[1]),
            room.eq(cfg.src_lwpg - a_rel),
            skip.eq((g_rel < 0) | (g_rel >= cfg.src_groups) | (a_rel < 0)
                    | (a_rel >= cfg.src_lwpg)),
            length.eq(Mux(room < cfg.burst, room, cfg.burst)),
            group.eq(cfg.src_group + g_rel),
        ]
        push = Signal(groups)
        entry = Signal(queued)
        m.d.comb += [
            entry.addr.eq(cfg.src_addr + a_rel),
            entry.flight.buf.eq(Mux(half, self.half_lw, 0) + offset),
            entry.flight.len.eq(length),
            entry.flight.half.eq(half),
        ]
        for g in range(groups):
            m.d.comb += [queues[g].w_data.eq(entry.as_value()), queues[g].w_en.eq(push[g])]
        room_in_queue = Signal()
        m.d.comb += room_in_queue.eq(Cat(q.w_rdy for q in queues).bit_select(group, 1))
        busy = Signal()  # bursts queued, in flight, or a half not yet reported full
        closing = Signal()  # ... and that was its block's last burst
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
                with m.If(skip | room_in_queue):
                    m.d.comb += walk.advance.eq(1)
                    m.d.comb += [push[g].eq(~skip & (group == g)) for g in range(groups)]
                    m.d.sync += offset.eq(offset + cfg.burst)
                    with m.If(walk.last):
                        m.d.comb += [closing.eq(1), walk.restart.eq(1), outer.advance.eq(1)]
                        m.d.sync += half.eq(~half)
                        with m.If(outer.last):
                            m.next = "FINISHED"
                        with m.Else():
                            m.next = "CLAIM"
            with m.State("FINISHED"):
                m.d.comb += self.done.eq(~busy)
                with m.If(self.start):
                    m.d.comb += [outer.restart.eq(1), walk.restart.eq(1)]
                    m.d.sync += half.eq(0)
                    m.next = "CLAIM"
        closed = self._returns(m, flights, flight, half, push, closing)
        m.d.comb += busy.eq(Cat(*(q.r_rdy for q in queues), *(f.r_rdy for f in flights),
                                closed).any())
        return m

    def _returns(self, m, flights, flight, half, push, closing):
        """Each Group's beats into the buffer through its own write port; each half's bursts
        counted until its block is in."""
        finished = [[] for _ in range(2)]  # per half: a Group's burst ends this cycle
        for g, f in enumerate(flights):
            head = data.View(flight, f.r_data)
            beat = Signal(range(max_burst(self.config) + 1), name=f"beat{g}")
            take = Signal(name=f"take{g}")
            m.d.comb += [
                take.eq(f.r_rdy & self.rdata_valid[g]),
                self.rdata_ready[g].eq(f.r_rdy),
                self.buf_en[g].eq(take),
                self.buf_addr[g].eq(head.buf + beat),
                self.buf_data[g].eq(self.rdata_data[g]),
                self.beats[g].eq(take),
                self.errors[g].eq(take & self.rdata_error[g]),
            ]
            ends = Signal(name=f"ends{g}")
            m.d.comb += ends.eq(take & (beat + 1 == head.len))
            with m.If(take):
                m.d.sync += beat.eq(Mux(ends, 0, beat + 1))
            m.d.comb += f.r_en.eq(ends)
            for h in range(2):
                finished[h].append(ends & (head.half == h))
        # per half: bursts queued and not yet in, and whether its block's walk has ended
        closed_halves = Signal(2)
        for h in range(2):
            count = Signal(range(self.half_lw + 1), name=f"count{h}")
            closed = Signal(name=f"closed{h}")
            mine = half == h
            m.d.sync += count.eq(count + (push.any() & mine) - sum(finished[h]))
            with m.If(closing & mine):
                m.d.sync += closed.eq(1)
            with m.If(closed & (count == 0)):
                m.d.sync += closed.eq(0)
                m.d.comb += self.filled[h].eq(1)
            with m.If(self.start):
                m.d.sync += [count.eq(0), closed.eq(0)]
            m.d.comb += closed_halves[h].eq(closed)
        return closed_halves
