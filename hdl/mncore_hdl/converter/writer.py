"""The converter's write engine: fills gaps with zeros and writes the destination as bursts."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import addr_bits, max_burst
from .config import config_layout
from .streams import gathered_signature

__all__ = ["WriteEngine", "BURSTS_AHEAD"]

#: Write requests issued and not yet written out (the burst FIFO).
BURSTS_AHEAD = 4


class WriteEngine(wiring.Component):
    """Write the whole destination footprint, Group by Group, in address order.

    The gather engine delivers the LWs holding data in increasing order; every LW of the
    footprint it skips (padding, or a gap between sub-axes) is written as zero, so the
    destination ends up exactly as ``ConversionDescriptor.execute`` says. Beats collect in a
    FIFO; a write request is issued only once all its beats are there, so a write never waits
    for data that itself waits for a read from the same controller, unless ``assured`` says no
    beat still to come waits for a read (every engine's reads are in): then requests go
    ahead of their beats (up to the burst FIFO's four), so the controller opens the row while
    the gather fills it, and the run's last block starts writing a burst's time earlier.

    Parameters
    ----------
    config : ArchConfig
    burst : int
        Longest write burst in LWs (bursts also stop at DRAM row ends).

    Attributes
    ----------
    words : In(gathered_signature(config))
        LWs from the gather engine (relative Group and address).
    gather_done : In(1)
        No more LWs will come.
    assured : In(1)
        Every LW still to come is in the buffer (every engine's reads are in); it stays
        high until the next ``start``.
    group_lo, group_hi : In
        The destination Groups this engine writes, relative to the destination's first:
        ``[group_lo, group_hi)`` (all of them on one engine, Group ``k`` alone on engine ``k``
        of a split program).
    req_valid, req_group, req_addr, req_len : Out; req_ready : In
        Write requests (absolute Group and address).
    wdata_valid : Out array; wdata_data : Out; wdata_ready : In array
        Write beats, to the Group of the oldest issued burst.
    """

    def __init__(self, config: ArchConfig, burst: int = 32):
        if isinstance(burst, bool) or not isinstance(burst, int):
            raise TypeError(f"Write burst must be an integer, not {burst!r}")
        if not 1 <= burst <= max_burst(config):
            raise ValueError(f"Write burst must be between 1 and {max_burst(config)}, not {burst}")
        self.config = config
        self.burst = burst
        groups = config.groups
        super().__init__({
            "cfg": In(config_layout(config)),
            "start": In(1),
            "done": Out(1),
            "words": In(gathered_signature(config)),
            "gather_done": In(1),
            "assured": In(1),
            "group_lo": In(range(groups + 1)),
            "group_hi": In(range(groups + 1)),
            "req_valid": Out(1),
            "req_group": Out(range(groups)),
            "req_addr": Out(addr_bits(config)),
            "req_len": Out(range(max_burst(config) + 1)),
            "req_ready": In(1),
            "wdata_valid": Out(1).array(groups),
            "wdata_data": Out(config.lw_bits),
            "wdata_ready": In(1).array(groups),
            "beat": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        cfgr = self.config
        groups = cfgr.groups
        m.submodules.beats = beats = SyncFIFO(width=cfgr.lw_bits, depth=2 * self.burst)
        issued = data.StructLayout({"group": range(groups), "len": range(self.burst + 1)})
        m.submodules.bursts = bursts = SyncFIFO(width=issued.size, depth=BURSTS_AHEAD)

        # -- gap filler: one beat per footprint LW, data where the gather has some ------------
        running = Signal()
        wg = Signal(range(groups + 1))
        wa = Signal(addr_bits(cfgr))
        filled = Signal()
        match = Signal()
        words = self.words
        m.d.comb += match.eq((words.payload.group == wg) & (words.payload.addr == wa))
        push = Signal()
        with m.If(running & ~filled & beats.w_rdy):
            with m.If(words.valid):
                m.d.comb += push.eq(1)
                m.d.comb += words.ready.eq(match)
            with m.Elif(self.gather_done):
                m.d.comb += push.eq(1)
        m.d.comb += [
            beats.w_en.eq(push),
            beats.w_data.eq(Mux(words.valid & match, words.payload.data, 0)),
        ]
        with m.If(push):
            m.d.sync += wa.eq(wa + 1)
            with m.If(wa + 1 == cfg.dst_lwpg):
                m.d.sync += [wa.eq(0), wg.eq(wg + 1)]
                with m.If(wg + 1 == self.group_hi):
                    m.d.sync += filled.eq(1)

        # -- requests: issued once their beats are buffered ------------------------------------
        # beats buffered less beats requested: negative once requests go ahead of their beats
        unclaimed = Signal(range(-BURSTS_AHEAD * self.burst, 2 * self.burst + 1))
        rg = Signal(range(groups + 1))
        ra = Signal(addr_bits(cfgr))
        requested = Signal()
        abs_addr = Signal(addr_bits(cfgr))
        m.d.comb += abs_addr.eq(cfg.dst_addr + ra)
        length = self._request_length(m, abs_addr, cfg.dst_lwpg - ra, unclaimed)
        m.d.comb += [
            self.req_valid.eq(running & ~requested & ((unclaimed >= length) | self.assured)
                              & bursts.w_rdy),
            self.req_group.eq(cfg.dst_group + rg),
            self.req_addr.eq(abs_addr),
            self.req_len.eq(length),
        ]
        entry = data.View(issued, bursts.w_data)
        m.d.comb += [entry.group.eq(self.req_group), entry.len.eq(length)]
        accept = Signal()
        m.d.comb += [accept.eq(self.req_valid & self.req_ready), bursts.w_en.eq(accept)]
        m.d.sync += unclaimed.eq(unclaimed + push - Mux(accept, length, 0))
        with m.If(accept):
            m.d.sync += ra.eq(ra + length)
            with m.If(ra + length == cfg.dst_lwpg):
                m.d.sync += [ra.eq(0), rg.eq(rg + 1)]
                with m.If(rg + 1 == self.group_hi):
                    m.d.sync += requested.eq(1)

        # -- write beats, to the Group of the oldest issued burst ------------------------------
        head = data.View(issued, bursts.r_data)
        count = Signal(range(self.burst + 1))
        ready = Array(self.wdata_ready)[head.group]
        m.d.comb += self.wdata_data.eq(beats.r_data)
        with m.If(bursts.r_rdy & beats.r_rdy):
            m.d.comb += Array(self.wdata_valid)[head.group].eq(1)
            with m.If(ready):
                m.d.comb += [beats.r_en.eq(1), self.beat.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count + 1 == head.len):
                    m.d.sync += count.eq(0)
                    m.d.comb += bursts.r_en.eq(1)

        # -- control ---------------------------------------------------------------------------
        with m.If(self.start):
            m.d.sync += [running.eq(1), wg.eq(self.group_lo), wa.eq(0), filled.eq(0),
                         rg.eq(self.group_lo), ra.eq(0), requested.eq(0), unclaimed.eq(0),
                         count.eq(0)]
        m.d.comb += self.done.eq(running & filled & requested & ~bursts.r_rdy & ~beats.r_rdy)
        return m

    def _request_length(self, m: Module, addr, group_left, unclaimed):
        """The next request's length: a full burst, cut at the end of the DRAM row of ``addr``
        and at the end of the Group's footprint (``group_left`` LWs on); ``unclaimed`` (beats
        buffered less requested) is unused here, where the length depends on the address only
        and holds while the request waits."""
        cfgr = self.config
        row_left = Signal(range(cfgr.row_lw + 1))
        group_left_s = Signal(32)
        length = Signal(range(self.burst + 1))
        m.d.comb += [
            row_left.eq(cfgr.row_lw - addr[:cfgr.col_bits]),
            group_left_s.eq(group_left),
            length.eq(self.burst),
        ]
        with m.If(row_left < self.burst):
            m.d.comb += length.eq(row_left)
        with m.If((group_left_s < self.burst) & (group_left_s < row_left)):
            m.d.comb += length.eq(group_left_s)
        return length
