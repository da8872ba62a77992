"""The converter's Group ports: requests arbitrated per Group (writes first), data routed."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature, addr_bits, max_burst

__all__ = ["PortRouter"]


class PortRouter(wiring.Component):
    """One requester port per Group, shared by the read and the write engine.

    A Group's port takes the write engine's request when it is for that Group, else the read
    engine's request for that Group (each Group has its own read stream; a write never waits
    behind a read that itself waits for buffer space), but a request shown on the port stays
    there until the port takes it (``lib.stream``: valid and payload hold until ready; proved
    in ``formal/converter.py``), so a write waits for a read request already shown; write
    beats and read beats go straight between the engines and the Group's streams.

    Parameters
    ----------
    config : ArchConfig

    Attributes
    ----------
    ports : Out(RequesterSignature(config)).array(config.groups)
        Requester port ``i`` goes to Group ``i``'s controller.
    wr_valid, wr_group, wr_addr, wr_len : In; wr_ready : Out
        The write engine's request.
    rd_valid, rd_addr, rd_len : In arrays; rd_ready : Out array
        The read engine's request for each Group.
    wdata_valid : In array; wdata_data : In; wdata_ready : Out array
        The write engine's beats, per Group.
    rdata_valid, rdata_data, rdata_error : Out array; rdata_ready : In array
        Read beats to the read engine, per Group.
    stall : Out(1)
        Some request or write beat offered is refused by its port this cycle.
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        groups = config.groups
        request = {"valid": 1, "group": range(groups), "addr": addr_bits(config),
                   "len": range(max_burst(config) + 1)}
        super().__init__({
            "ports": Out(RequesterSignature(config)).array(groups),
            **{f"wr_{name}": In(shape) for name, shape in request.items()},
            **{f"rd_{name}": In(shape).array(groups) for name, shape in request.items()
               if name != "group"},
            "wr_ready": Out(1),
            "rd_ready": Out(1).array(groups),
            "wdata_valid": In(1).array(groups),
            "wdata_data": In(config.lw_bits),
            "wdata_ready": Out(1).array(groups),
            "rdata_valid": Out(1).array(groups),
            "rdata_data": Out(config.lw_bits).array(groups),
            "rdata_error": Out(1).array(groups),
            "rdata_ready": In(1).array(groups),
            "stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        stalls = []
        for i, port in enumerate(self.ports):
            # a read request shown and not taken stays shown until it is (the stream rule on
            # the port): a write for this Group that comes meanwhile waits behind it
            rd_shown = Signal(name=f"rd_shown{i}")
            m.d.sync += rd_shown.eq(port.req.valid & ~port.req.ready & ~port.req.p.write)
            wr_here = self.wr_valid & (self.wr_group == i) & ~rd_shown
            rd_here = self.rd_valid[i] & ~wr_here
            m.d.comb += [
                port.req.valid.eq(wr_here | rd_here),
                port.req.p.write.eq(wr_here),
                port.req.p.addr.eq(Mux(wr_here, self.wr_addr, self.rd_addr[i])),
                port.req.p.length.eq(Mux(wr_here, self.wr_len, self.rd_len[i])),
                self.rd_ready[i].eq(rd_here & port.req.ready),
                port.wdata.valid.eq(self.wdata_valid[i]),
                port.wdata.p.data.eq(self.wdata_data),
                port.wdata.p.strb.eq(-1),
                self.wdata_ready[i].eq(port.wdata.ready),
                self.rdata_valid[i].eq(port.rdata.valid),
                self.rdata_data[i].eq(port.rdata.p.data),
                self.rdata_error[i].eq(port.rdata.p.error),
                port.rdata.ready.eq(self.rdata_ready[i]),
            ]
            with m.If(wr_here):
                m.d.comb += self.wr_ready.eq(port.req.ready)
            stalls.append((port.req.valid & ~port.req.ready)
                          | (port.wdata.valid & ~port.wdata.ready))
        m.d.comb += self.stall.eq(Cat(*stalls).any())
        return m
