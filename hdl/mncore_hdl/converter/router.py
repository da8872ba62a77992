"""The converter's Group ports: each shared by every engine's reads and one engine's writes."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature, addr_bits, max_burst
from .program import READ_OUTSTANDING

__all__ = ["PortRouter"]


class PortRouter(wiring.Component):
    """One requester port per Group, shared by the engines' read streams and one write engine.

    Each engine has a read stream per Group and one write engine. Group ``g``'s writes come
    from one engine: engine ``g`` when ``split`` (it writes destination Group ``g`` only),
    else engine 0 (the only one running). A Group's port takes that writer's request when it
    is for this Group, else one engine's read request for this Group, round robin over the
    engines; but a request shown on the port stays there until the port takes it
    (``lib.stream``: valid and payload hold until ready; proved in ``formal/converter.py``),
    so a write waits for a read request already shown, and the round robin waits with it.
    The port returns read beats in request order: each taken read's engine and length go into
    a tag FIFO (room for every engine's ``READ_OUTSTANDING`` bursts; a read is shown only
    with room), whose head says which engine the next beats go to. Write beats go straight
    from the Group's writer to the port.

    Parameters
    ----------
    config : ArchConfig
    engines : int
        Engines sharing the ports (1 .. ``config.groups``).

    Attributes
    ----------
    ports : Out(RequesterSignature(config)).array(config.groups)
        Requester port ``g`` goes to Group ``g``'s controller.
    split, dst_group : In
        When ``split``, engine ``k`` writes Group ``dst_group + k`` (else engine 0 writes
        every Group).
    wr_valid, wr_group, wr_addr, wr_len : In arrays [engine]; wr_ready : Out array [engine]
        Each engine's write request.
    rd_valid, rd_addr, rd_len : In arrays [engine][group]; rd_ready : Out [engine][group]
        Each engine's read request for each Group.
    wdata_valid : In [engine][group]; wdata_data : In [engine]; wdata_ready : Out [engine][group]
        Each engine's write beats, per Group.
    rdata_valid, rdata_data, rdata_error : Out [engine][group]; rdata_ready : In [engine][group]
        Read beats to each engine, per Group.
    hold : In array [group]
        Show no new read request on Group ``g`` (one already shown stays): its writer streams
        a block whose beats need no read.
    stall : Out(1)
        Some request or write beat offered is refused by its port this cycle.
    """

    def __init__(self, config: ArchConfig, engines: int = 1):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        if isinstance(engines, bool) or not isinstance(engines, int):
            raise TypeError(f"Engine count must be an integer, not {engines!r}")
        if not 1 <= engines <= config.groups:
            raise ValueError(f"Engine count must be between 1 and {config.groups}, not {engines}")
        self.config = config
        self.engines = engines
        groups = config.groups
        burst = range(max_burst(config) + 1)
        super().__init__({
            "ports": Out(RequesterSignature(config)).array(groups),
            "split": In(1),
            "dst_group": In(range(groups)),
            "wr_valid": In(1).array(engines),
            "wr_group": In(range(groups)).array(engines),
            "wr_addr": In(addr_bits(config)).array(engines),
            "wr_len": In(burst).array(engines),
            "wr_ready": Out(1).array(engines),
            "rd_valid": In(1).array(engines, groups),
            "rd_addr": In(addr_bits(config)).array(engines, groups),
            "rd_len": In(burst).array(engines, groups),
            "rd_ready": Out(1).array(engines, groups),
            "wdata_valid": In(1).array(engines, groups),
            "wdata_data": In(config.lw_bits).array(engines),
            "wdata_ready": Out(1).array(engines, groups),
            "rdata_valid": Out(1).array(engines, groups),
            "rdata_data": Out(config.lw_bits).array(engines, groups),
            "rdata_error": Out(1).array(engines, groups),
            "rdata_ready": In(1).array(engines, groups),
            "hold": In(1).array(groups),
            "stall": Out(1),
        })

    def _writer(self, g: int):
        """The engine whose writes may go to Group ``g``: ``g - dst_group`` when split (engine
        ``k`` writes the destination's Group ``k``), else 0."""
        if g == 0:
            return 0
        here = self.split & (g >= self.dst_group)
        return Mux(here, (g - self.dst_group)[:max(1, (self.engines - 1).bit_length())], 0)

    def elaborate(self, platform):
        m = Module()
        n = self.engines
        burst = range(max_burst(self.config) + 1)
        tag = data.StructLayout({"engine": range(n), "len": burst})
        stalls = []
        wr_ready = [[] for _ in range(n)]
        for g, port in enumerate(self.ports):
            w = self._writer(g)
            wr = {name: Array(getattr(self, f"wr_{name}"))[w]
                  for name in ("valid", "group", "addr", "len")}
            # -- the read tags: which engine each taken read's beats go to ------------------
            tags = SyncFIFO(width=tag.size, depth=n * READ_OUTSTANDING)
            m.submodules[f"tags{g}"] = tags
            # -- request: the writer first, unless a read is already shown --------------------
            rd_shown = Signal(name=f"rd_shown{g}")
            m.d.sync += rd_shown.eq(port.req.valid & ~port.req.ready & ~port.req.p.write)
            held = Signal(range(n), name=f"rd_held{g}")  # the engine whose read is shown
            turn = Signal(range(n), name=f"rd_turn{g}")  # the round robin's first choice
            valid = [self.rd_valid[e][g] & tags.w_rdy for e in range(n)]
            pick = Signal(range(n), name=f"rd_pick{g}")
            any_rd = Signal(name=f"rd_any{g}")
            # round robin: the first valid engine from ``turn`` on
            for offset in reversed(range(n)):
                for t in range(n):
                    e = (t + offset) % n
                    with m.If((turn == t) & valid[e]):
                        m.d.comb += pick.eq(e)
            m.d.comb += any_rd.eq(Cat(*valid).any())
            sel = Signal(range(n), name=f"rd_sel{g}")
            m.d.comb += sel.eq(Mux(rd_shown, held, pick))
            wr_here = Signal(name=f"wr_here{g}")
            rd_here = Signal(name=f"rd_here{g}")
            m.d.comb += [
                wr_here.eq(wr["valid"] & (wr["group"] == g) & ~rd_shown),
                rd_here.eq(Mux(rd_shown, Array(self.rd_valid[e][g] for e in range(n))[held],
                               any_rd & ~self.hold[g]) & ~wr_here),
            ]
            m.d.sync += held.eq(sel)
            taken = Signal(name=f"rd_taken{g}")
            m.d.comb += [
                port.req.valid.eq(wr_here | rd_here),
                port.req.p.write.eq(wr_here),
                port.req.p.addr.eq(Mux(wr_here, wr["addr"],
                                       Array(self.rd_addr[e][g] for e in range(n))[sel])),
                port.req.p.length.eq(Mux(wr_here, wr["len"],
                                         Array(self.rd_len[e][g] for e in range(n))[sel])),
                taken.eq(rd_here & port.req.ready),
            ]
            entry = data.View(tag, tags.w_data)
            m.d.comb += [entry.engine.eq(sel),
                         entry.len.eq(Array(self.rd_len[e][g] for e in range(n))[sel]),
                         tags.w_en.eq(taken)]
            for e in range(n):
                m.d.comb += self.rd_ready[e][g].eq(taken & (sel == e))
            with m.If(taken):
                m.d.sync += turn.eq(Mux(sel == n - 1, 0, sel + 1))
            for e in range(n):
                if isinstance(w, int):
                    mine = wr_here if e == w else 0
                else:
                    mine = wr_here & (w == e)
                if not isinstance(mine, int):
                    wr_ready[e].append(mine & port.req.ready)
            # -- read beats to the engine of the oldest taken read ---------------------------
            head = data.View(tag, tags.r_data)
            beat = Signal(burst, name=f"rd_beat{g}")
            ready = Array(self.rdata_ready[e][g] for e in range(n))[head.engine]
            m.d.comb += port.rdata.ready.eq(tags.r_rdy & ready)
            for e in range(n):
                m.d.comb += [
                    self.rdata_valid[e][g].eq(port.rdata.valid & tags.r_rdy
                                              & (head.engine == e)),
                    self.rdata_data[e][g].eq(port.rdata.p.data),
                    self.rdata_error[e][g].eq(port.rdata.p.error),
                ]
            with m.If(port.rdata.valid & port.rdata.ready):
                m.d.sync += beat.eq(beat + 1)
                with m.If(beat + 1 == head.len):
                    m.d.sync += beat.eq(0)
                    m.d.comb += tags.r_en.eq(1)
            # -- write beats from the Group's writer --------------------------------------
            wvalid = Array(self.wdata_valid[e][g] for e in range(n))[w]
            m.d.comb += [
                port.wdata.valid.eq(wvalid),
                port.wdata.p.data.eq(Array(self.wdata_data)[w]),
                port.wdata.p.strb.eq(-1),
            ]
            for e in range(n):
                m.d.comb += self.wdata_ready[e][g].eq(port.wdata.ready & (w == e))
            stalls.append((port.req.valid & ~port.req.ready)
                          | (port.wdata.valid & ~port.wdata.ready))
        for e in range(n):
            m.d.comb += self.wr_ready[e].eq(Cat(*wr_ready[e]).any() if wr_ready[e] else 0)
        m.d.comb += self.stall.eq(Cat(*stalls).any())
        return m
