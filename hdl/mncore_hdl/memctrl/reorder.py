"""Reordering port frontend (``fr_fcfs``): a chunk window served out of order, reorder buffers."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..arch import ArchConfig
from .port import max_burst
from .requester import (
    check_frontend,
    count_beats,
    frontend_members,
    read_fifo_depth,
    write_fifo_depth,
)
from .signatures import BankStateSignature, chunk_addr_bits

__all__ = ["ReorderFrontend", "issue_order", "rob_slots", "write_buffer_beats"]


def rob_slots(config: ArchConfig, depth: int) -> int:
    """Read chunks a port may have issued and not yet handed over (a power of two): the
    window plus the in-order frontend's read FIFO in bursts, so that a chunk waiting for its
    bank does not stop the ones behind it for want of a slot while its data is under way."""
    bl = config.timing.burst_length
    need = depth + -(-read_fifo_depth(config) // bl)
    return 1 << (need - 1).bit_length()


def write_buffer_beats(config: ArchConfig, depth: int) -> int:
    """Write beats a port holds (a power of two): the in-order frontend's write FIFO plus
    half the window's chunks in bursts, so that writes waiting for their banks leave room
    for the beats of the writes behind them."""
    bl = config.timing.burst_length
    need = write_fifo_depth(config) + depth * bl // 2 + bl
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
    * a write: all its beats are in the write-data ring (``write_buffer_beats`` beats, the
      requester's beats in order; the chunk's tag is the position of its first beat);
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

    Parameters
    ----------
    config : ArchConfig
        Geometry, timing and ``scheduler_starvation_cap``.
    depth : int
        Chunks in the window (the controller gives ``scheduler_window``).

    Attributes
    ----------
    banks : In(BankStateSignature).array(banks)
        The banks' states (which queued chunks are row hits now).
    bus_free, rd_allowed, wr_allowed : Signal, in
        The data bus and the rules between banks, as the scheduler's.
    """

    def __init__(self, config: ArchConfig, depth: int = 2):
        check_frontend(config, depth)
        self.config = config
        self.depth = depth
        self.slots = rob_slots(config, depth)
        self.write_beats_held = write_buffer_beats(config, depth)
        super().__init__({
            **frontend_members(config, depth),
            "banks": In(BankStateSignature(config)).array(config.banks),
            "bus_free": In(1),
            "rd_allowed": In(1),
            "wr_allowed": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        window = cfg.sim_window_lw
        rbits = (self.slots - 1).bit_length() + 2        # read distances < 4 * slots
        wbits = (self.write_beats_held - 1).bit_length() + 2

        # -- the window: entries (valid, addr, len, write, tag), oldest first ----------------
        # a read's tag is its sequence number, a write's the position of its first beat in
        # the write-data buffer (the requester's write beats in order)
        q = [_Entry(cfg, max(rbits, wbits), i) for i in range(self.depth)]
        ptr = {
            "ralloc": Signal(rbits, name="rob_alloc"),   # sequence number of the next read
            "drain": Signal(rbits, name="rob_drain"),    # the oldest read owed to the port
            "walloc": Signal(wbits, name="wbuf_alloc"),  # first beat of the next write chunk
            "wfill": Signal(wbits, name="wbuf_fill"),    # beats the requester has sent
        }
        sel = self._choose(m, q, ptr)
        push, chunk = self._chunker(m, q[-1].valid)
        # state exposed for the proofs' invariants (formal/frontend.py, formal/reorder.py)
        self.entries, self.cut, self.pointers = q, chunk, ptr
        self._queue_update(m, q, sel, push, chunk, ptr)

        h = self.head
        tag = Signal.like(q[0].tag, name="sel_tag")
        m.d.comb += [
            h.head_valid.eq(q[0].valid),
            h.head_addr.eq(Array(e.addr for e in q)[sel]),
            h.head_len.eq(Array(e.len for e in q)[sel]),
            h.head_write.eq(Array(e.write for e in q)[sel]),
            h.head_oow.eq(h.head_addr >= window),
            tag.eq(Array(e.tag for e in q)[sel]),
        ]
        for k, e in enumerate(q):
            m.d.comb += [
                h.ahead_valid[k].eq(e.valid & (e.addr < window)),
                h.ahead_addr[k].eq(e.addr),
            ]

        w_in = self._write_buffer(m, q, tag, ptr)
        r_out = self._reorder_buffer(m, tag, ptr["drain"])
        m.d.comb += self.pending.eq(q[0].valid | chunk["valid"]
                                    | (ptr["drain"] != ptr["ralloc"]))

        count_beats(m, self, r_out, w_in)
        return m

    def _choose(self, m, q, ptr):
        """The entry presented as the head (FR-FCFS among the legal ones); drives
        ``head_eligible``, returns the index."""
        cfg = self.config
        cb, bb = cfg.col_bits, cfg.bank_bits
        lbl = cfg.timing.burst_length.bit_length() - 1
        # per bank, as vectors each entry takes bits of (a multiplexer per entry and bank
        # property costs an event-driven simulator a process each)
        col_open = Signal(cfg.banks, name="bank_col_open")
        open_rows = Signal(cfg.banks * len(self.banks[0].open_row), name="bank_open_rows")
        m.d.comb += [col_open.eq(Cat(bs.is_open & bs.col_ready for bs in self.banks)),
                     open_rows.eq(Cat(bs.open_row for bs in self.banks))]
        rb = len(self.banks[0].open_row)
        last_write = Signal()
        wb = len(ptr["wfill"])
        legal, ready, same = [], [], []
        for k, e in enumerate(q):
            clash = Cat(Const(0, 1), *[o.valid & (o.addr[lbl:] == e.addr[lbl:]) for o in q[:k]])
            rdist = Signal(len(ptr["drain"]), name=f"rob_dist{k}")
            wdist = Signal(wb, name=f"wbuf_dist{k}")   # beats of this write sent, if < 2 x held
            m.d.comb += [rdist.eq(e.tag - ptr["drain"]), wdist.eq(ptr["wfill"] - e.tag[:wb])]
            data_ok = ~wdist[-1] & (wdist >= e.len)
            ok = Mux(e.write, data_ok, rdist < self.slots)
            lg = Signal(name=f"legal{k}")
            m.d.comb += lg.eq(e.valid & ~clash.any() & ok)
            bank = e.addr[cb:cb + bb] if bb else 0
            dir_ok = Mux(e.write, self.wr_allowed, self.rd_allowed)
            hit = col_open.bit_select(bank, 1) & (open_rows.word_select(bank, rb)
                                                  == e.addr[cb + bb:])
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
        # read by formal/reorder.py
        self.oldest_legal, self.selected, self.passed = legal[0], sel, passed
        with m.If(self.issue):
            m.d.sync += last_write.eq(self.head.head_write)
            with m.If(sel == 0):
                m.d.sync += passed.eq(0)
            with m.Elif(passed != cap):
                m.d.sync += passed.eq(passed + 1)
        return sel

    def _write_buffer(self, m, q, tag, ptr):
        """The requester's write beats, in order, in a ring of ``write_beats_held`` beats; a
        write chunk's beats are read from its position; returns the ``wdata`` accept strobe.

        A beat may enter while it stays within ``write_beats_held - burst_length`` beats of
        the oldest queued write's first beat and does not overwrite the burst on the bus."""
        cfg = self.config
        bl = cfg.timing.burst_length
        held = self.write_beats_held
        hb = (held - 1).bit_length()
        wb = len(ptr["wfill"])
        wdata = self.bus.wdata
        m.submodules.wbuf = wbuf = Memory(shape=unsigned(cfg.lw_bits + cfg.lw_bytes),
                                          depth=held, init=[])
        wr = wbuf.write_port()
        rd = wbuf.read_port(domain="comb")
        # the oldest queued write's first beat, else the next write's
        tail = ptr["walloc"]
        for e in reversed(q):
            tail = Mux(e.valid & e.write, e.tag[:wb], tail)
        # the beats of the write burst on the data bus: from its position, one per ``wpop``
        rpos = Signal(wb, name="wbuf_read")
        left = Signal(range(bl + 1), name="wbuf_left")
        with m.If(self.issue & self.head.head_write):
            m.d.sync += [rpos.eq(tag[:wb]), left.eq(self.head.head_len)]
        with m.Elif(self.wpop):
            m.d.sync += [rpos.eq(rpos + 1), left.eq(left - 1)]
        used = Signal(wb, name="wbuf_used")
        ahead = Signal(wb, name="wbuf_ahead")
        m.d.comb += [used.eq(ptr["wfill"] - tail), ahead.eq(ptr["wfill"] - rpos)]
        w_in = wdata.valid & wdata.ready
        m.d.comb += [
            # room: behind the oldest queued write, and behind the burst being written (a
            # write issued ahead of it may be older than that one)
            wdata.ready.eq((used.as_signed() < held - bl) & ((left == 0) | (ahead < held))),
            wr.addr.eq(ptr["wfill"][:hb]),
            wr.data.eq(Cat(wdata.payload.data, wdata.payload.strb)),
            wr.en.eq(w_in),
        ]
        with m.If(w_in):
            m.d.sync += ptr["wfill"].eq(ptr["wfill"] + 1)
        m.d.comb += [
            rd.addr.eq(rpos[:hb]),
            self.wbeat_data.eq(rd.data[:cfg.lw_bits]),
            self.wbeat_strb.eq(rd.data[cfg.lw_bits:]),
        ]
        return w_in

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

    def _queue_update(self, m, q, sel, push, chunk, ptr):
        """Remove entry ``sel`` when it issues (the younger ones move down), then append the
        pushed chunk at the first free entry: a read chunk takes the next sequence number, a
        write chunk the next beats of the write-data buffer."""
        issue = self.issue
        shifted = []
        for i, e in enumerate(q):
            above = q[i + 1] if i + 1 < len(q) else None
            s = _Entry(self.config, len(e.tag), f"s{i}")
            move = issue & (sel <= i)
            for d, cur, nxt in zip(s.fields(), e.fields(),
                                   above.fields() if above else (Const(0, 1),) + e.fields()[1:],
                                   strict=True):
                m.d.comb += d.eq(Mux(move, nxt, cur))
            shifted.append(s)
        tag = Mux(chunk["write"], ptr["walloc"], ptr["ralloc"])
        new = (Const(1, 1), chunk["addr"], chunk["len"], chunk["write"], tag)
        for i, (e, s) in enumerate(zip(q, shifted, strict=True)):
            below = shifted[i - 1].valid if i else Const(1, 1)
            enter = Signal(name=f"w{i}_enter")
            m.d.comb += enter.eq(push & ~s.valid & below)
            # unconditional next values: continuous assignments in Verilog, not processes
            m.d.sync += [d.eq(Mux(enter, v, c))
                         for d, v, c in zip(e.fields(), new, s.fields(), strict=True)]
        with m.If(push & chunk["write"]):
            m.d.sync += ptr["walloc"].eq(ptr["walloc"] + chunk["len"])
        with m.If(push & ~chunk["write"]):
            m.d.sync += ptr["ralloc"].eq(ptr["ralloc"] + 1)

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
        # per slot: beats arrived and the chunk's length, as registers with decoded write
        # enables, read as words of a vector (an ``Array`` write makes every slot's next
        # value a multiplexer over all slots)
        lb = bl.bit_length()                       # counts 0 .. bl
        arrived = [Signal(lb, name=f"rob_arrived{s}") for s in range(ns)]
        length = [Signal(lb, name=f"rob_len{s}") for s in range(ns)]
        arrived_v = Signal(ns * lb, name="rob_arrived")
        length_v = Signal(ns * lb, name="rob_lens")
        m.d.comb += [arrived_v.eq(Cat(*arrived)), length_v.eq(Cat(*length))]

        # issued reads in issue order (the data engine returns their beats in that order)
        issue_slot = issue_seq[:sb] if sb else Const(0, 1)
        r_issue = self.issue & ~self.head.head_write
        pop = Signal(name="inflight_pop")
        slot_in = issue_order(m, self, issue_slot, r_issue, pop, ns)
        beat_in = Signal(range(bl), name="rob_beat_in")
        len_in = Signal(lb, name="rob_len_in")
        in_last = Signal(name="rob_in_last")
        m.d.comb += [
            wr.addr.eq(slot_in * bl + beat_in),
            wr.data.eq(Cat(self.rpush_data, self.rpush_error)),
            wr.en.eq(self.rpush),
            len_in.eq(length_v.word_select(slot_in, lb)),
            in_last.eq(beat_in + 1 == len_in),
        ]
        with m.If(self.rpush):
            with m.If(in_last):
                m.d.sync += beat_in.eq(0)
                m.d.comb += pop.eq(1)
            with m.Else():
                m.d.sync += beat_in.eq(beat_in + 1)

        # hand the oldest slot's beats to the requester
        slot_out = drain[:sb] if sb else Const(0, 1)
        beat_out = Signal(range(bl), name="rob_beat_out")
        out_last = Signal(name="rob_out_last")
        m.d.comb += [
            rd.addr.eq(slot_out * bl + beat_out),
            rdata.valid.eq(arrived_v.word_select(slot_out, lb) > beat_out),
            rdata.payload.data.eq(rd.data[:cfg.lw_bits]),
            rdata.payload.error.eq(rd.data[cfg.lw_bits]),
            out_last.eq(beat_out + 1 == length_v.word_select(slot_out, lb)),
        ]
        r_out = rdata.valid & rdata.ready
        with m.If(r_out):
            with m.If(out_last):
                m.d.sync += [beat_out.eq(0), drain.eq(drain + 1)]
            with m.Else():
                m.d.sync += beat_out.eq(beat_out + 1)

        # the slots' registers: a slot handed over restarts (wins over a beat arriving)
        for k in range(ns):
            took = Signal(name=f"rob_took{k}")
            came = Signal(name=f"rob_came{k}")
            freed = Signal(name=f"rob_freed{k}")
            m.d.comb += [took.eq(r_issue & (issue_slot == k)),
                         came.eq(self.rpush & (slot_in == k)),
                         freed.eq(r_out & out_last & (slot_out == k))]
            m.d.sync += [length[k].eq(Mux(took, self.head.head_len, length[k])),
                         arrived[k].eq(Mux(freed, 0, arrived[k] + came))]
        # state exposed for the proofs' invariants (formal/reorder.py)
        self.rob = {"arrived": arrived, "length": length, "beat_in": beat_in,
                    "beat_out": beat_out}
        return r_out


def issue_order(m, fe, slot, push, pop, depth):
    """The slots of the issued reads whose beats are owed, in issue order.

    A queue of ``depth`` entries with ``SyncFIFO``'s behaviour (a push while full and a pop
    while empty are ignored; the head entry is shown whatever the level), kept in registers
    that ``fe.inflight`` exposes for the proofs' invariants (``formal/reorder_state.py``).

    Parameters
    ----------
    m : Module
        The frontend's module.
    fe : ReorderFrontend
        The frontend (``fe.inflight`` is set: entries, pointers, level, push and pop).
    slot : Value
        The slot of the read issued this cycle.
    push, pop : Value
        A read issued; the head's last beat arrived.
    depth : int
        Entries (the reorder buffer's slots).

    Returns
    -------
    Value
        The head entry.
    """
    entries = [Signal.like(slot, name=f"inflight{k}") for k in range(depth)]
    produce = Signal(range(depth), name="inflight_produce")
    consume = Signal(range(depth), name="inflight_consume")
    level = Signal(range(depth + 1), name="inflight_level")
    do_push = push & (level != depth)
    do_pop = pop & (level != 0)
    m.d.sync += [e.eq(Mux(do_push & (produce == k), slot, e)) for k, e in enumerate(entries)]
    m.d.sync += [produce.eq(Mux(do_push, _next(produce, depth), produce)),
                 consume.eq(Mux(do_pop, _next(consume, depth), consume)),
                 level.eq(level + do_push - do_pop)]
    fe.inflight = {"entries": entries, "produce": produce, "consume": consume, "level": level,
                   "slot": slot, "push": do_push, "pop": do_pop}
    return Cat(*entries).word_select(consume, len(slot))


def _next(pointer, depth):
    """A ring pointer's next position."""
    return Mux(pointer == depth - 1, 0, pointer + 1)


class _Entry:
    """One window entry's registers."""

    def __init__(self, config: ArchConfig, tag_bits: int, name):
        bl = config.timing.burst_length
        self.valid = Signal(name=f"w{name}_valid")
        self.addr = Signal(chunk_addr_bits(config), name=f"w{name}_addr")
        self.len = Signal(range(bl + 1), name=f"w{name}_len")
        self.write = Signal(name=f"w{name}_write")
        self.tag = Signal(tag_bits, name=f"w{name}_tag")

    def fields(self):
        return (self.valid, self.addr, self.len, self.write, self.tag)
