"""Controller side of one requester port: request queue, burst chunker, data FIFOs, counters."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.counters import COUNTER_BITS
from .port import RequesterSignature, max_burst
from .signatures import HeadSignature, chunk_addr_bits

__all__ = ["PortFrontend", "check_frontend", "count_beats", "frontend_members",
           "read_fifo_depth", "write_fifo_depth"]


def read_fifo_depth(config: ArchConfig) -> int:
    """Read beats buffered per port: enough to stream while data is in the CL pipeline."""
    return config.timing.cl + 2 * config.timing.burst_length + 8


def write_fifo_depth(config: ArchConfig) -> int:
    """Write beats buffered per port: two column bursts plus slack."""
    return 2 * config.timing.burst_length + 4


def check_frontend(config: object, depth: object) -> None:
    """The checks of a port frontend's parameters: an ArchConfig and a positive depth."""
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TypeError(f"Queue depth must be an integer, not {depth!r}")
    if depth <= 0:
        raise ValueError(f"Queue depth must be a positive integer, not {depth}")


def frontend_members(config: ArchConfig, ahead: int) -> dict:
    """The ports every port frontend has: requester, head view, data beats, counters."""
    return {
        "bus": In(RequesterSignature(config)),
        "head": Out(HeadSignature(config, ahead)),
        "head_eligible": Out(1),
        "issue": In(1),
        "wpop": In(1),
        "wbeat_data": Out(config.lw_bits),
        "wbeat_strb": Out(config.lw_bytes),
        "rpush": In(1),
        "rpush_data": In(config.lw_bits),
        "rpush_error": In(1),
        "pending": Out(1),
        "read_beats": Out(COUNTER_BITS),
        "write_beats": Out(COUNTER_BITS),
        "stall_cycles": Out(COUNTER_BITS),
    }


def count_beats(m: Module, fe, r_out, w_in) -> None:
    """The per-port counters: beats handed over / taken, cycles ``req`` was held off."""
    req = fe.bus.req
    with m.If(r_out):
        m.d.sync += fe.read_beats.eq(fe.read_beats + 1)
    with m.If(w_in):
        m.d.sync += fe.write_beats.eq(fe.write_beats + 1)
    with m.If(req.valid & ~req.ready):
        m.d.sync += fe.stall_cycles.eq(fe.stall_cycles + 1)


class PortFrontend(wiring.Component):
    """Turns one requester's streams into column-sized chunks for the scheduler.

    Requests go through a queue of ``depth`` entries (``next``: one for the in-order
    scheduler; with more, the entries behind the first are shown to the scheduler as
    ``head.ahead_*`` so that it prepares their banks) into the chunker (``cur``), which cuts a
    burst into chunks of at most ``burst_length`` beats that never cross a burst-aligned block
    (so never a row, nor the window edge). A chunk is ``head_eligible`` once the data it needs
    is assured: a write chunk when all its beats sit in the write FIFO, a read chunk when the
    read FIFO has room for all its beats (credits reserved at issue, returned as the requester
    takes beats). Once eligible, a chunk stays eligible until it is issued.

    Attributes
    ----------
    bus : In(RequesterSignature)
        The requester port.
    head : Out(HeadSignature)
        What the scheduler sees: the chunk waiting for a column command (``head_valid``,
        ``head_addr``, ``head_len``, ``head_write``, ``head_oow`` when it lies outside the
        window) and the look-ahead ``la_valid``, ``la_addr``: the start of the next row this
        port will touch after the head's row.
    head_eligible : Signal, out
        The head chunk's data is assured (see above).
    issue : Signal, in
        The head chunk's column command is issued this cycle.
    wpop : Signal, in; wbeat_data, wbeat_strb : Signal, out
        The data engine takes one write beat.
    rpush, rpush_data, rpush_error : Signal, in
        The data engine delivers one read beat.
    pending : Signal, out
        A request is queued or read beats are still owed to the requester.
    read_beats, write_beats, stall_cycles : Signal(32), out
        Beats handed to / taken from the requester, and cycles ``req`` was held off.
    """

    def __init__(self, config: ArchConfig, depth: int = 1):
        check_frontend(config, depth)
        self.config = config
        self.depth = depth
        super().__init__(frontend_members(config, depth - 1))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bl = cfg.timing.burst_length
        caw = chunk_addr_bits(cfg)
        lbits = max_burst(cfg).bit_length()
        window = cfg.sim_window_lw
        wdata, rdata = self.bus.wdata, self.bus.rdata

        # -- request queue (entry 0 is the next request, visible for look-ahead) ---------
        queue = self._queue(m, caw, lbits)
        nxt_valid, nxt_addr, nxt_len, nxt_write = queue[0]
        pop = Signal()

        # -- chunker ----------------------------------------------------------------------
        cur_valid = Signal()
        cur_addr = Signal(caw)
        cur_rem = Signal(lbits)
        cur_write = Signal()
        lbl = bl.bit_length() - 1
        to_boundary = Signal(range(bl + 1))
        m.d.comb += to_boundary.eq(bl - cur_addr[:lbl] if lbl else 1)
        head_len = Signal(range(bl + 1))
        m.d.comb += head_len.eq(Mux(cur_rem < to_boundary, cur_rem, to_boundary))
        last = Signal()
        m.d.comb += last.eq(cur_rem == head_len)
        self.chunk_valid, self.chunk_rem = cur_valid, cur_rem   # read by formal/frontend.py

        done = Signal()
        m.d.comb += done.eq(~cur_valid | (self.issue & last))
        with m.If(self.issue):
            m.d.sync += [
                cur_addr.eq(cur_addr + head_len),
                cur_rem.eq(cur_rem - head_len),
            ]
        with m.If(done):
            m.d.sync += cur_valid.eq(0)
            with m.If(nxt_valid):
                m.d.comb += pop.eq(1)
                m.d.sync += [
                    cur_valid.eq(nxt_len != 0),  # a zero-length request is dropped
                    cur_addr.eq(nxt_addr),
                    cur_rem.eq(nxt_len),
                    cur_write.eq(nxt_write),
                ]

        m.d.comb += [
            self.head.head_valid.eq(cur_valid),
            self.head.head_addr.eq(cur_addr),
            self.head.head_len.eq(head_len),
            self.head.head_write.eq(cur_write),
            self.head.head_oow.eq(cur_addr >= window),
        ]

        # -- look-ahead: the next row after the head's row --------------------------------
        cb = cfg.col_bits
        row_left = Signal(range(cfg.row_lw + 1))
        m.d.comb += row_left.eq(cfg.row_lw - cur_addr[:cb])
        cont = Signal()
        m.d.comb += cont.eq(cur_valid & (cur_rem > row_left))
        la_addr = Signal(caw)
        next_row_addr = Signal(caw)
        m.d.comb += next_row_addr.eq((cur_addr[cb:] + 1) << cb)
        m.d.comb += la_addr.eq(Mux(cont, next_row_addr, nxt_addr))
        m.d.comb += [
            self.head.la_addr.eq(la_addr),
            self.head.la_valid.eq((cont | (nxt_valid & (nxt_len != 0))) & (la_addr < window)),
        ]
        self._queue_update(m, queue, pop)
        for k, (valid, addr, length, _) in enumerate(queue[1:]):
            m.d.comb += [
                self.head.ahead_valid[k].eq(valid & (length != 0) & (addr < window)),
                self.head.ahead_addr[k].eq(addr),
            ]

        # -- write data FIFO and the beats not yet claimed by a column command -------------
        wd = write_fifo_depth(cfg)
        m.submodules.wfifo = wfifo = SyncFIFO(width=cfg.lw_bits + cfg.lw_bytes, depth=wd)
        m.d.comb += [
            wfifo.w_data.eq(Cat(wdata.payload.data, wdata.payload.strb)),
            wfifo.w_en.eq(wdata.valid),
            wdata.ready.eq(wfifo.w_rdy),
            wfifo.r_en.eq(self.wpop),
            self.wbeat_data.eq(wfifo.r_data[:cfg.lw_bits]),
            self.wbeat_strb.eq(wfifo.r_data[cfg.lw_bits:]),
        ]
        wavail = Signal(range(wd + 1))
        w_in = wdata.valid & wdata.ready
        w_claim = self.issue & cur_write
        m.d.sync += wavail.eq(wavail + w_in - Mux(w_claim, head_len, 0))

        # -- read data FIFO and its credits -------------------------------------------------
        rd = read_fifo_depth(cfg)
        m.submodules.rfifo = rfifo = SyncFIFO(width=cfg.lw_bits + 1, depth=rd)
        m.d.comb += [
            rfifo.w_data.eq(Cat(self.rpush_data, self.rpush_error)),
            rfifo.w_en.eq(self.rpush),
            rdata.valid.eq(rfifo.r_rdy),
            rdata.payload.data.eq(rfifo.r_data[:cfg.lw_bits]),
            rdata.payload.error.eq(rfifo.r_data[cfg.lw_bits]),
            rfifo.r_en.eq(rdata.ready),
        ]
        reserved = Signal(range(rd + 1))
        r_out = rdata.valid & rdata.ready
        r_claim = self.issue & ~cur_write
        m.d.sync += reserved.eq(reserved + Mux(r_claim, head_len, 0) - r_out)

        m.d.comb += self.head_eligible.eq(cur_valid & Mux(
            cur_write, wavail >= head_len, reserved + head_len <= rd))

        m.d.comb += self.pending.eq(cur_valid | nxt_valid | rfifo.r_rdy | (reserved != 0))

        count_beats(m, self, r_out, w_in)
        return m

    def _queue(self, m, caw, lbits):
        """The request queue's entries ``(valid, addr, length, write)``, oldest first.

        The valid entries are always the lowest ones; ``req`` is ready while the last is free
        (never in the cycle it frees, so a one-entry queue alternates accept and hand-over).
        """
        queue = [(Signal(name=f"q{i}_valid"), Signal(caw, name=f"q{i}_addr"),
                  Signal(lbits, name=f"q{i}_len"), Signal(name=f"q{i}_write"))
                 for i in range(self.depth)]
        m.d.comb += self.bus.req.ready.eq(~queue[-1][0])
        return queue

    def _queue_update(self, m, queue, pop):
        """Shift the queue down when ``pop`` (the chunker took entry 0); append an accepted
        request at the first entry that is free after the shift."""
        req = self.bus.req
        push = req.valid & req.ready
        new = (1, req.payload.addr, req.payload.length, req.payload.write)
        for i, entry in enumerate(queue):
            above = queue[i + 1] if i + 1 < len(queue) else None
            above_valid = above[0] if above is not None else Const(0, 1)
            below_valid = queue[i - 1][0] if i else 1
            with m.If(pop):
                # after the shift this entry holds the one above; it is the first free one
                # when that is empty and this one was full
                with m.If(push & ~above_valid & entry[0]):
                    m.d.sync += [d.eq(v) for d, v in zip(entry, new, strict=True)]
                with m.Else():
                    if above is not None:
                        m.d.sync += [d.eq(v) for d, v in zip(entry, above, strict=True)]
                    else:
                        m.d.sync += entry[0].eq(0)
            with m.Elif(push & ~entry[0] & below_valid):
                m.d.sync += [d.eq(v) for d, v in zip(entry, new, strict=True)]
