"""The data bus: one beat per cycle between the backing store and the port FIFOs, CL delayed."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import chunk_addr_bits

__all__ = ["DataEngine"]


class DataEngine(wiring.Component):
    """Moves the beats of one column burst at a time, and owns the backing store.

    A column command issued in cycle ``t`` (``load``) moves beat ``k`` in cycle ``t + 1 + k``.
    A write beat is taken from its port's write FIFO and stored (bytes selected by ``strb``).
    A read beat reads the store in that same cycle, so reads and writes take effect in command
    order, and its data reaches the port's read FIFO in cycle ``t + cl + k``: the CAS latency.
    Beats of a chunk outside the window touch nothing: write beats are dropped, read beats
    return zero with ``error`` set. ``free`` says a new burst may be loaded this cycle, which
    keeps back-to-back bursts gapless.

    Parameters
    ----------
    config : ArchConfig
        Geometry and CAS latency.
    ports : int
        Number of requester ports.

    Attributes
    ----------
    mem : Memory
        The backing store: ``sim_window_lw`` LWs, addressed by LW.
    """

    def __init__(self, config: ArchConfig, ports: int):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        self.ports = ports
        caw = chunk_addr_bits(config)
        bl = config.timing.burst_length
        bb = max(1, config.bank_bits)
        lw = config.lw_bits
        super().__init__({
            "load": In(1),
            "load_addr": In(caw),
            "load_len": In(range(bl + 1)),
            "load_write": In(1),
            "load_oow": In(1),
            "load_port": In(range(ports)),
            "free": Out(1),
            "active": Out(1),
            "write": Out(1),
            "oow": Out(1),
            "bank": Out(bb),
            "pipe_busy": Out(1),
            "wpop": Out(ports),
            "wbeat_data": In(lw).array(ports),
            "wbeat_strb": In(config.lw_bytes).array(ports),
            "rpush": Out(ports),
            "rpush_data": Out(lw),
            "rpush_error": Out(1),
        })
        self.mem = Memory(shape=unsigned(lw), depth=config.sim_window_lw, init=[])

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        cb, bb = cfg.col_bits, cfg.bank_bits
        m.submodules.mem = mem = self.mem
        wr = mem.write_port(granularity=8)
        rd = mem.read_port(domain="sync")

        # -- burst engine -------------------------------------------------------------------
        addr = Signal(chunk_addr_bits(cfg))
        rem = Signal(range(cfg.timing.burst_length + 1))
        port = Signal(range(self.ports))
        m.d.comb += self.free.eq(~self.active | (rem == 1))
        if bb:
            m.d.comb += self.bank.eq(addr[cb:cb + bb])
        with m.If(self.active):
            m.d.sync += [addr.eq(addr + 1), rem.eq(rem - 1)]
            with m.If(rem == 1):
                m.d.sync += self.active.eq(0)
        with m.If(self.load):
            m.d.sync += [
                self.active.eq(1),
                addr.eq(self.load_addr),
                rem.eq(self.load_len),
                self.write.eq(self.load_write),
                self.oow.eq(self.load_oow),
                port.eq(self.load_port),
            ]

        # -- write beats ----------------------------------------------------------------------
        wbeat = self.active & self.write
        data_mux = Array(self.wbeat_data)
        strb_mux = Array(self.wbeat_strb)
        m.d.comb += [
            wr.addr.eq(addr),
            wr.data.eq(data_mux[port]),
        ]
        with m.If(wbeat & ~self.oow):
            m.d.comb += wr.en.eq(strb_mux[port])
        for i in range(self.ports):
            m.d.comb += self.wpop[i].eq(wbeat & (port == i))

        # -- read beats: read now, deliver CL cycles after the command ------------------------
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(1)]
        rbeat = self.active & ~self.write
        # Stage 0 is aligned with the store's registered output (one cycle after the read);
        # stages 1 .. CL-2 follow it. The beat's flags (valid, port, error) shift through one
        # narrow register, stage ``i`` in the ``i``-th field from the bottom (one register
        # update per cycle for an event-driven simulator, one machine word for a C++ model);
        # its data waits in a ring of CL-2 words written and read at one rotating index, so
        # no wide vector shifts every cycle.
        stages = cfg.timing.cl - 1
        v0 = Signal(name="rv0")
        p0 = Signal(range(self.ports), name="rp0")
        e0 = Signal(name="re0")
        m.d.sync += [v0.eq(rbeat), p0.eq(port), e0.eq(self.oow)]
        head = Cat(v0, p0, e0)
        width = len(head)
        valid = [v0]
        if stages > 1:
            tail = Signal(width * (stages - 1), name="cas_flags")
            m.d.sync += tail.eq(Cat(head, tail[:-width]))
            out = tail[-width:]
            valid += [tail[i * width] for i in range(stages - 1)]
            out_d = self._delay_ring(m, rd.data, stages - 1)
        else:
            out = head
            out_d = rd.data
        pw = len(p0)
        out_v, out_p, out_e = out[0], out[1:1 + pw], out[1 + pw]
        for i in range(self.ports):
            m.d.comb += self.rpush[i].eq(out_v & (out_p == i))
        m.d.comb += [
            self.rpush_data.eq(out_d & ~out_e.replicate(cfg.lw_bits)),
            self.rpush_error.eq(out_e),
            self.pipe_busy.eq(Cat(*valid).any()),
        ]
        return m

    @staticmethod
    def _delay_ring(m, data, depth):
        """``data`` as it was ``depth`` cycles ago: a ring of ``depth`` words, each cycle
        read at the rotating index and written there with the new word."""
        m.submodules.cas_ring = ring = Memory(shape=unsigned(len(data)), depth=depth, init=[])
        at = Signal(range(depth), name="cas_at")
        wr = ring.write_port()
        rd = ring.read_port(domain="comb")
        m.d.comb += [wr.addr.eq(at), wr.data.eq(data), wr.en.eq(1), rd.addr.eq(at)]
        m.d.sync += at.eq(Mux(at == depth - 1, 0, at + 1))
        return rd.data
