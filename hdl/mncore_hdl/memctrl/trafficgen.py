"""Hardware traffic generators and the bench top (controller + one generator per port).

Used by ``bench/bench_memctrl.py`` so that a simulator runs a whole stream with no Python in
the loop: the bench sets the parameters, pulses ``start`` and waits for ``done``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import CSR_ADDR_BITS, PORTS
from .controller import MemoryController
from .port import RequesterSignature, max_burst
from .signatures import chunk_addr_bits

__all__ = ["Mode", "RW", "TrafficGen", "BenchTop"]


class Mode:
    """Generator modes."""

    READ = 0      #: sequential read bursts from ``base``
    WRITE = 1     #: sequential write bursts to ``base``
    MIXED = 2     #: read burst from ``base``, write burst to ``base2``, alternating (a copy)
    RANDOM = 3    #: bursts at random aligned addresses, directions as ``rw`` says


class RW:
    """Directions of ``Mode.RANDOM`` bursts (the ``rw`` parameter)."""

    COIN = 0      #: read or write at random, half each
    READ = 1      #: reads only
    TWO_ONE = 2   #: two reads, then a write, repeating


def _params(config: ArchConfig) -> dict:
    caw = chunk_addr_bits(config)
    return {
        "mode": In(2),
        "rw": In(2),
        "base": In(caw),
        "base2": In(caw),
        "count": In(24),
        "blen": In(max_burst(config).bit_length()),
    }


class TrafficGen(wiring.Component):
    """Drives one requester port with ``count`` bursts of ``blen`` beats in mode ``mode``.

    ``start`` (one cycle) latches the parameters; ``done`` rises when every request was
    accepted, every write beat taken and every read beat received (``rdata`` is always ready).
    """

    def __init__(self, config: ArchConfig, seed: int = 0xACE12468):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        if not isinstance(seed, int) or not 0 < seed < 1 << 32:
            raise ValueError(f"LFSR seed must be a non-zero 32-bit integer, not {seed!r}")
        self.config = config
        self.seed = seed
        super().__init__({
            "bus": Out(RequesterSignature(config)),
            "start": In(1),
            "done": Out(1),
            **_params(config),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        req, wdata, rdata = self.bus.req, self.bus.wdata, self.bus.rdata
        running = Signal()
        issued = Signal(24)
        addr_a = Signal.like(self.base)
        addr_b = Signal.like(self.base2)
        phase = Signal()
        rowed = Signal(32)
        wowed = Signal(32)
        lfsr = Signal(32, init=self.seed)
        beat = Signal(32)
        third = Signal(range(3))

        # -- request stream ---------------------------------------------------------------
        win_bits = max(1, cfg.sim_window_lw.bit_length() - 1)  # largest power of two inside
        bl_bits = cfg.timing.burst_length.bit_length() - 1
        rand_addr = Signal(win_bits)
        m.d.comb += rand_addr.eq(Cat(Signal(bl_bits), lfsr[bl_bits:win_bits]) if bl_bits
                                 else lfsr[:win_bits])
        is_write = Signal()
        with m.Switch(self.mode):
            with m.Case(Mode.READ):
                m.d.comb += [req.payload.addr.eq(addr_a), is_write.eq(0)]
            with m.Case(Mode.WRITE):
                m.d.comb += [req.payload.addr.eq(addr_a), is_write.eq(1)]
            with m.Case(Mode.MIXED):
                m.d.comb += [req.payload.addr.eq(Mux(phase, addr_b, addr_a)), is_write.eq(phase)]
            with m.Case(Mode.RANDOM):
                m.d.comb += req.payload.addr.eq(rand_addr)
                with m.Switch(self.rw):
                    with m.Case(RW.COIN):
                        m.d.comb += is_write.eq(lfsr[31])
                    with m.Case(RW.TWO_ONE):
                        m.d.comb += is_write.eq(third == 2)
        m.d.comb += [
            req.payload.write.eq(is_write),
            req.payload.length.eq(self.blen),
            req.valid.eq(running & (issued != self.count)),
        ]
        accepted = req.valid & req.ready
        with m.If(accepted):
            m.d.sync += [issued.eq(issued + 1), phase.eq(~phase),
                         third.eq(Mux(third == 2, 0, third + 1))]
            m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[1] ^ lfsr[21] ^ lfsr[31]))
            with m.If((self.mode == Mode.MIXED) & phase):
                m.d.sync += addr_b.eq(addr_b + self.blen)
            with m.Else():
                m.d.sync += addr_a.eq(addr_a + self.blen)

        # -- data streams -------------------------------------------------------------------
        w_out = wdata.valid & wdata.ready
        r_in = rdata.valid & rdata.ready
        m.d.comb += [
            wdata.valid.eq(wowed != 0),
            wdata.payload.data.eq(beat),
            wdata.payload.strb.eq(-1),
            rdata.ready.eq(1),
        ]
        m.d.sync += [
            wowed.eq(wowed + Mux(accepted & is_write, self.blen, 0) - w_out),
            rowed.eq(rowed + Mux(accepted & ~is_write, self.blen, 0) - r_in),
        ]
        with m.If(w_out):
            m.d.sync += beat.eq(beat + 1)

        # -- control ----------------------------------------------------------------------------
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), issued.eq(0), phase.eq(0),
                         third.eq(0), addr_a.eq(self.base), addr_b.eq(self.base2)]
        with m.Elif(running & (issued == self.count) & (rowed == 0) & (wowed == 0)):
            m.d.sync += [running.eq(0), self.done.eq(1)]
        return m


class BenchTop(wiring.Component):
    """A memory controller with a :class:`TrafficGen` on each port.

    Generator ``i``'s parameters are the ``gen<i>_*`` inputs. ``start`` starts every generator
    whose ``gen<i>_count`` is non-zero; ``done`` rises once all of them are done and the
    controller is idle; ``cycles`` counts the cycles from ``start`` to ``done``. The
    controller's register port is passed through.
    """

    def __init__(self, config: ArchConfig, ports: int = len(PORTS)):
        self.config = config
        self.port_count = ports
        members = {"start": In(1), "done": Out(1), "cycles": Out(32),
                   "csr_addr": In(CSR_ADDR_BITS), "csr_rdata": Out(COUNTER_BITS)}
        for i in range(ports):
            for name, member in _params(config).items():
                members[f"gen{i}_{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mc = mc = MemoryController(self.config, self.port_count)
        gens_done = []
        for i in range(self.port_count):
            gen = TrafficGen(self.config, seed=0x1234_5679 * (i + 1) & 0xFFFF_FFFF)
            m.submodules[f"gen{i}"] = gen
            wiring.connect(m, gen.bus, mc.ports[i])
            for name in _params(self.config):
                m.d.comb += getattr(gen, name).eq(getattr(self, f"gen{i}_{name}"))
            m.d.comb += gen.start.eq(self.start & (gen.count != 0))
            gens_done.append(gen.done | (gen.count == 0))
        m.d.comb += [mc.csr_addr.eq(self.csr_addr), self.csr_rdata.eq(mc.csr_rdata)]
        running = Signal()
        all_done = Cat(*gens_done).all() & mc.idle
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), self.cycles.eq(0)]
        with m.Elif(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(all_done):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        return m
