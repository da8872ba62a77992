"""Reordering port frontend for ``fr_fcfs``: a chunk window issued out of order, a read reorder buffer."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.counters import COUNTER_BITS
from .port import RequesterSignature, max_burst
from .requester import write_fifo_depth
from .signatures import BankStateSignature, HeadSignature, chunk_addr_bits

__all__ = ["ReorderFrontend", "rob_slots"]


def rob_slots(config: ArchConfig, depth: int) -> int:
    """Read chunks a port may have issued and not yet handed over: a power of two covering
    the window and at least the in-order frontend's read FIFO."""
    bl = config.timing.burst_length
    need = max(depth, -(-(config.timing.cl + 2 * bl + 8) // bl))
    return 1 << (need - 1).bit_length()


class ReorderFrontend(wiring.Component):
    """One requester port whose queued chunks the scheduler may serve out of request order.

    A request is cut into chunks (at most ``burst_length`` beats, never across a burst-aligned
    block) as it arrives, and the chunks wait in a window of ``depth`` entries. Each cycle the
    frontend presents one of them as its ``head``, chosen first-ready first-come first-served
    among the *legal* ones: the first whose column command could issue now in the direction
    of the port's last column command, else the first that could issue now, else the first
    legal one. A chunk is legal when

    * no older queued chunk of the port touches the same burst-aligned block (so a read never
      passes an older write to an overlapping address, a write never passes an older read or
      write to one, and same-address chunks keep request order);
    * a write: no older write is queued (writes keep their order among themselves, so their
      beats leave the write FIFO in order) and all its beats are in the write FIFO;
    * a read: its slot of the read reorder buffer is free (fewer than ``rob_slots`` reads
      ahead of it are still owed to the requester).

    When the oldest chunk has been passed ``scheduler_starvation_cap`` times it is presented
    whenever it is legal. Every queued chunk is shown as ``head.ahead_*`` for the scheduler's
    preparation, the chunk being cut as the look-ahead.

    Read chunks take sequence numbers as they enter the window; a read's beats land in the
    reorder buffer slot of its number (``lib.memory``, ``rob_slots x burst_length`` beats), and
    ``rdata`` hands the slots out in sequence order, each its chunk's length: read data keeps
    request order at the port whatever order the column commands took.

    The ports are :class:`~.requester.PortFrontend`'s, plus the views the choice needs.

    Attributes
    ----------
    banks : In(BankStateSignature).array(banks)
        The banks' states (which queued chunks are row hits now).
    bus_free, rd_allowed, wr_allowed : Signal, in
        The data bus and the rules between banks, as the scheduler's.
    """

    def __init__(self, config: ArchConfig, depth: int = 2):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        if isinstance(depth, bool) or not isinstance(depth, int):
            raise TypeError(f"Queue depth must be an integer, not {depth!r}")
        if depth <= 0:
            raise ValueError(f"Queue depth must be a positive integer, not {depth}")
        self.config = config
        self.depth = depth
        self.slots = rob_slots(config, depth)
        super().__init__({
            "bus": In(RequesterSignature(config)),
            "head": Out(HeadSignature(config, depth)),
            "head_eligible": Out(1),
            "issue": In(1),
            "banks": In(BankStateSignature(config)).array(config.banks),
            "bus_free": In(1),
            "rd_allowed": In(1),
            "wr_allowed": In(1),
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
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        window = cfg.sim_window_lw
        caw = chunk_addr_bits(cfg)
        seq_bits = (self.slots - 1).bit_length() + 2   # seq distance < 4 * slots

        # -- the window: entries (valid, addr, len, write, seq), oldest first ----------------
        q = [_Entry(cfg, seq_bits, i) for i in range(self.depth)]
        alloc = Signal(seq_bits)     # sequence number of the next read chunk
        drain = Signal(seq_bits)     # sequence number of the oldest read owed to the port
        wavail = Signal(range(write_fifo_depth(cfg) + 1))
        sel = self._choose(m, q, drain, wavail)
        push, chunk = self._chunker(m, q[-1].valid)
        self._queue_update(m, q, sel, push, chunk, alloc)

        h = self.head
        m.d.comb += [
            h.head_valid.eq(q[0].valid),
            h.head_addr.eq(Array(e.addr for e in q)[sel]),
            h.head_len.eq(Array(e.len for e in q)[sel]),
            h.head_write.eq(Array(e.write for e in q)[sel]),
            h.head_oow.eq(h.head_addr >= window),
        ]
        for k, e in enumerate(q):
            m.d.comb += [
                h.ahead_valid[k].eq(e.valid & (e.addr < window)),
                h.ahead_addr[k].eq(e.addr),
            ]

        # -- write data FIFO and the beats not yet claimed by a column command -------------
        wdata = self.bus.wdata
        m.submodules.wfifo = wfifo = SyncFIFO(width=cfg.lw_bits + cfg.lw_bytes,
                                              depth=write_fifo_depth(cfg))
        m.d.comb += [
            wfifo.w_data.eq(Cat(wdata.payload.data, wdata.payload.strb)),
            wfifo.w_en.eq(wdata.valid),
            wdata.ready.eq(wfifo.w_rdy),
            wfifo.r_en.eq(self.wpop),
            self.wbeat_data.eq(wfifo.r_data[:cfg.lw_bits]),
            self.wbeat_strb.eq(wfifo.r_data[cfg.lw_bits:]),
        ]
        w_in = wdata.valid & wdata.ready
        w_claim = self.issue & h.head_write
        m.d.sync += wavail.eq(wavail + w_in - Mux(w_claim, h.head_len, 0))

        r_out = self._reorder_buffer(m, Array(e.seq for e in q)[sel], drain)
        m.d.comb += self.pending.eq(q[0].valid | chunk["valid"] | (drain != alloc))

        # -- counters -----------------------------------------------------------------------
        req = self.bus.req
        with m.If(r_out):
            m.d.sync += self.read_beats.eq(self.read_beats + 1)
        with m.If(w_in):
            m.d.sync += self.write_beats.eq(self.write_beats + 1)
        with m.If(req.valid & ~req.ready):
            m.d.sync += self.stall_cycles.eq(self.stall_cycles + 1)
        return m

    def _choose(self, m, q, drain, wavail):
        """The entry presented as the head (FR-FCFS among the legal ones); drives
        ``head_eligible``, returns the index."""
        cfg = self.config
        cb, bb = cfg.col_bits, cfg.bank_bits
        lbl = cfg.timing.burst_length.bit_length() - 1
        is_open = Array(bs.is_open for bs in self.banks)
        open_row = Array(bs.open_row for bs in self.banks)
        col_ready = Array(bs.col_ready for bs in self.banks)
        last_write = Signal()
        legal, ready, same = [], [], []
        older_write = Const(0, 1)
        for k, e in enumerate(q):
            clash = Cat(Const(0, 1), *[o.valid & (o.addr[lbl:] == e.addr[lbl:]) for o in q[:k]])
            dist = Signal(len(drain), name=f"rob_dist{k}")
            m.d.comb += dist.eq(e.seq - drain)
            ok = Mux(e.write, ~older_write & (wavail >= e.len), dist < self.slots)
            lg = Signal(name=f"legal{k}")
            m.d.comb += lg.eq(e.valid & ~clash.any() & ok)
            older_write = older_write | (e.valid & e.write)
            bank = e.addr[cb:cb + bb] if bb else 0
            dir_ok = Mux(e.write, self.wr_allowed, self.rd_allowed)
            hit = is_open[bank] & (open_row[bank] == e.addr[cb + bb:]) & col_ready[bank]
            rd = Signal(name=f"ready{k}")
            m.d.comb += rd.eq(lg & self.bus_free & ((e.addr >= cfg.sim_window_lw) | (hit & dir_ok)))
            legal.append(lg)
            ready.append(rd)
            same.append(rd & (e.write == last_write))

        sel = Signal(range(len(q)), name="sel")
        cap = cfg.scheduler_starvation_cap
        passed = Signal(range(cap + 1), name="passed")
        choice = Const(0, len(sel))
        for group in (legal, ready, same):
            pick = Const(0, len(sel))
            for k in reversed(range(len(q))):
                pick = Mux(group[k], k, pick)
            choice = Mux(Cat(*group).any(), pick, choice)
        m.d.comb += [
            sel.eq(Mux((passed == cap) & legal[0], 0, choice)),
            self.head_eligible.eq(Cat(*legal).any()),
        ]
        with m.If(self.issue):
            m.d.sync += last_write.eq(self.head.head_write)
            with m.If(sel == 0):
                m.d.sync += passed.eq(0)
            with m.Elif(passed != cap):
                m.d.sync += passed.eq(passed + 1)
        return sel

    def _chunker(self, m, full):
        """Cut the accepted request into chunks, one into the window per cycle; returns the
        push strobe and the chunk being cut."""
        cfg = self.config
        bl = cfg.timing.burst_length
        lbl = bl.bit_length() - 1
        lbits = max_burst(cfg).bit_length()
        req = self.bus.req
        c = {"valid": Signal(name="cut_valid"), "addr": Signal(chunk_addr_bits(cfg),
             name="cut_addr"), "rem": Signal(lbits, name="cut_rem"),
             "write": Signal(name="cut_write"), "len": Signal(range(bl + 1), name="cut_len")}
        to_boundary = Signal(range(bl + 1))
        m.d.comb += [
            to_boundary.eq(bl - c["addr"][:lbl] if lbl else 1),
            c["len"].eq(Mux(c["rem"] < to_boundary, c["rem"], to_boundary)),
        ]
        last = c["rem"] == c["len"]
        push = Signal(name="cut_push")
        m.d.comb += [
            push.eq(c["valid"] & (~full | self.issue)),
            req.ready.eq(~c["valid"] | (push & last)),
            self.head.la_valid.eq(c["valid"] & (c["addr"] < cfg.sim_window_lw)),
            self.head.la_addr.eq(c["addr"]),
        ]
        with m.If(push):
            m.d.sync += [c["addr"].eq(c["addr"] + c["len"]), c["rem"].eq(c["rem"] - c["len"])]
            with m.If(last):
                m.d.sync += c["valid"].eq(0)
        with m.If(req.valid & req.ready):
            m.d.sync += [
                c["valid"].eq(req.payload.length != 0),   # a zero-length request is dropped
                c["addr"].eq(req.payload.addr),
                c["rem"].eq(req.payload.length),
                c["write"].eq(req.payload.write),
            ]
        return push, c

    def _queue_update(self, m, q, sel, push, chunk, alloc):
        """Remove entry ``sel`` when it issues (the younger ones move down), then append the
        pushed chunk at the first free entry; a read chunk takes the next sequence number."""
        issue = self.issue
        shifted = []
        for i, e in enumerate(q):
            above = q[i + 1] if i + 1 < len(q) else None
            s = _Entry(self.config, len(alloc), f"s{i}")
            move = issue & (sel <= i)
            for d, cur, nxt in zip(s.fields(), e.fields(),
                                   above.fields() if above else (Const(0, 1),) + e.fields()[1:],
                                   strict=True):
                m.d.comb += d.eq(Mux(move, nxt, cur))
            shifted.append(s)
        new = (Const(1, 1), chunk["addr"], chunk["len"], chunk["write"], alloc)
        for i, (e, s) in enumerate(zip(q, shifted, strict=True)):
            below = shifted[i - 1].valid if i else Const(1, 1)
            with m.If(push & ~s.valid & below):
                m.d.sync += [d.eq(v) for d, v in zip(e.fields(), new, strict=True)]
            with m.Else():
                m.d.sync += [d.eq(v) for d, v in zip(e.fields(), s.fields(), strict=True)]
        with m.If(push & ~chunk["write"]):
            m.d.sync += alloc.eq(alloc + 1)

    def _reorder_buffer(self, m, issue_seq, drain):
        """Read beats into their chunk's slot, out to ``rdata`` in sequence order; returns the
        ``rdata`` transfer strobe."""
        cfg = self.config
        bl = cfg.timing.burst_length
        ns = self.slots
        sb = (ns - 1).bit_length()
        rdata = self.bus.rdata
        m.submodules.rob = rob = Memory(shape=unsigned(cfg.lw_bits + 1), depth=ns * bl, init=[])
        wr = rob.write_port()
        rd = rob.read_port(domain="comb")
        arrived = Array(Signal(range(bl + 1), name=f"rob_arrived{s}") for s in range(ns))
        length = Array(Signal(range(bl + 1), name=f"rob_len{s}") for s in range(ns))

        # issued reads in issue order (the data engine returns their beats in that order)
        m.submodules.inflight = inflight = SyncFIFO(width=max(1, sb), depth=ns)
        issue_slot = issue_seq[:sb] if sb else Const(0, 1)
        r_issue = self.issue & ~self.head.head_write
        m.d.comb += [inflight.w_data.eq(issue_slot), inflight.w_en.eq(r_issue)]
        with m.If(r_issue):
            m.d.sync += length[issue_slot].eq(self.head.head_len)
        slot_in = inflight.r_data
        beat_in = Signal(range(bl), name="rob_beat_in")
        m.d.comb += [
            wr.addr.eq(slot_in * bl + beat_in),
            wr.data.eq(Cat(self.rpush_data, self.rpush_error)),
            wr.en.eq(self.rpush),
        ]
        with m.If(self.rpush):
            m.d.sync += arrived[slot_in].eq(arrived[slot_in] + 1)
            with m.If(beat_in + 1 == length[slot_in]):
                m.d.sync += beat_in.eq(0)
                m.d.comb += inflight.r_en.eq(1)
            with m.Else():
                m.d.sync += beat_in.eq(beat_in + 1)

        # hand the oldest slot's beats to the requester
        slot_out = drain[:sb] if sb else Const(0, 1)
        beat_out = Signal(range(bl), name="rob_beat_out")
        m.d.comb += [
            rd.addr.eq(slot_out * bl + beat_out),
            rdata.valid.eq(arrived[slot_out] > beat_out),
            rdata.payload.data.eq(rd.data[:cfg.lw_bits]),
            rdata.payload.error.eq(rd.data[cfg.lw_bits]),
        ]
        r_out = rdata.valid & rdata.ready
        with m.If(r_out):
            with m.If(beat_out + 1 == length[slot_out]):
                m.d.sync += [beat_out.eq(0), drain.eq(drain + 1), arrived[slot_out].eq(0)]
            with m.Else():
                m.d.sync += beat_out.eq(beat_out + 1)
        return r_out


class _Entry:
    """One window entry's registers."""

    def __init__(self, config: ArchConfig, seq_bits: int, tag):
        bl = config.timing.burst_length
        self.valid = Signal(name=f"w{tag}_valid")
        self.addr = Signal(chunk_addr_bits(config), name=f"w{tag}_addr")
        self.len = Signal(range(bl + 1), name=f"w{tag}_len")
        self.write = Signal(name=f"w{tag}_write")
        self.seq = Signal(seq_bits, name=f"w{tag}_seq")

    def fields(self):
        return (self.valid, self.addr, self.len, self.write, self.seq)
