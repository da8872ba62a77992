"""A behavioural Group memory: the controller side of the requester port with a fixed latency.

A stand-in for the real memory controller in converter unit tests: one request at a time,
``latency`` idle cycles before a read's first beat, then one beat per cycle; writes take one
beat per cycle. Out-of-window beats read zero with ``error`` set and are not written.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature, addr_bits, max_burst

__all__ = ["BehaviouralMemory"]


class BehaviouralMemory(wiring.Component):
    """One Group's DRAM as a plain memory behind ``ports`` requester ports.

    Parameters
    ----------
    config : ArchConfig
        Window size and LW width.
    ports : int
        Requester ports (served lowest index first).
    latency : int
        Cycles from accepting a read to its first beat.
    init : sequence of int
        Initial contents from address 0 (the rest is zero).

    Attributes
    ----------
    ports : In(RequesterSignature(config)).array(ports)
    mem : Memory
        The backing store (``config.sim_window_lw`` LWs), named ``mem`` for back-door access.
    """

    def __init__(self, config: ArchConfig, ports: int = 1, latency: int = 8, init=()):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        for name, value, low in (("Port count", ports, 1), ("Latency", latency, 1)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, not {value!r}")
            if value < low:
                raise ValueError(f"{name} must be a positive integer, not {value}")
        self.config = config
        self.port_count = ports
        self.latency = latency
        super().__init__({"ports": In(RequesterSignature(config)).array(ports)})
        self.mem = Memory(shape=unsigned(config.lw_bits), depth=config.sim_window_lw,
                          init=list(init))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.mem = mem = self.mem
        wr = mem.write_port()
        rd = mem.read_port(domain="comb")
        n = self.port_count
        port = Signal(range(n))
        addr = Signal(addr_bits(cfg))
        left = Signal(range(max_burst(cfg) + 1))
        wait = Signal(range(self.latency + 1))
        out_valid = Signal()
        out_data = Signal(cfg.lw_bits)
        out_error = Signal()
        inside = Signal()
        m.d.comb += [inside.eq(addr < cfg.sim_window_lw), rd.addr.eq(addr), wr.addr.eq(addr)]
        wdata = Array(p.wdata for p in self.ports)[port]
        rdata = Array(p.rdata for p in self.ports)[port]
        m.d.comb += [rdata.valid.eq(out_valid), rdata.p.data.eq(out_data),
                     rdata.p.error.eq(out_error)]

        write = Signal()
        with m.FSM():
            with m.State("IDLE"):
                for i in range(n):
                    req = self.ports[i].req
                    with (m.If if i == 0 else m.Elif)(req.valid):
                        m.d.comb += req.ready.eq(1)
                        m.d.sync += [port.eq(i), addr.eq(req.p.addr), left.eq(req.p.length),
                                     write.eq(req.p.write), wait.eq(self.latency - 1)]
                        m.next = "LATCHED"
            with m.State("LATCHED"):
                m.next = "READ_WAIT"
                with m.If(write):
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += wdata.ready.eq(1)
                with m.If(wdata.valid):
                    m.d.comb += [wr.en.eq(inside), wr.data.eq(wdata.p.data)]
                    m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
                    with m.If(left == 1):
                        m.next = "IDLE"
            with m.State("READ_WAIT"):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.next = "READ"
            with m.State("READ"):
                with m.If(~out_valid | rdata.ready):
                    m.d.sync += [out_valid.eq(left != 0), out_data.eq(Mux(inside, rd.data, 0)),
                                 out_error.eq(~inside)]
                    with m.If(left != 0):
                        m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
                    with m.Else():
                        m.next = "IDLE"
        return m
