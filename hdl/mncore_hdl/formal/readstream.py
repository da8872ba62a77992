"""Proof harness of the requester streams: read beats in request order, exactly ``length`` each."""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, ResetSignal, Signal

from ..arch import ArchConfig, DramTiming
from ..contracts.memctrl import max_burst
from ..memctrl.signatures import chunk_addr_bits
from .memctrl import PROOF_CONFIG, assume_port_protocol, elaborate_controller
from .primitives import AnyConst, AnySeq, Assert, Assume

__all__ = ["MEMORY_AS_FLOPS", "READ_ORDER_CONFIG", "ReadOrderProof", "TRACK_BITS", "lw_tag"]

#: The proof config with every rule at its shortest: the order of beats depends on the
#: scheduling, not on how long each rule is, and short rules bring more beats inside the
#: depth (the first beat reaches ``rdata`` in cycle 5). tREFI stays 10: a refresh falls inside.
READ_ORDER_CONFIG = PROOF_CONFIG.replace(timing=DramTiming(
    cl=2, trcd=1, trp=1, tras=1, twr=1, trefi=10, trfc=2, burst_length=2, trrd=1, tfaw=1,
    twtr=0, trtp=1, trtw=0, tccd=1))

#: Yosys commands (``prove(script=...)``) that turn the backing store into flip-flops.
MEMORY_AS_FLOPS = ("memory_map", "opt -fast")

#: Width of the request counters: the tracked read request is one of the first 2**TRACK_BITS.
TRACK_BITS = 3


def lw_tag(addr: int) -> int:
    """The byte every byte of LW ``addr`` holds at the start of the proof: ``addr + 1``."""
    return (addr + 1) & 0xFF


class ReadOrderProof(Elaboratable):
    """The controller with a monitor on each port's read stream and write-beat accounting.

    The backing store starts with every byte of LW ``a`` equal to :func:`lw_tag` ``(a)``; the
    requester writes only all-ones data (any byte enables), so each byte of LW ``a`` is
    ``lw_tag(a)`` or ``0xff`` for ever: a read beat's data names the address it came from. The
    monitor tags one read request, the ``N``-th a port accepts (``N`` a symbolic constant, so
    every request is the tagged one in some run), with its address ``A``, length ``L`` and the
    number ``S`` of read beats owed to the port before it. Asserted, per port:

    - no read beat arrives that no accepted read request owes;
    - beats ``S .. S+L-1`` of the port's read stream are, in order, the LWs ``A .. A+L-1``:
      data naming that address with ``error`` low inside the window, zero data with ``error``
      high outside it (so each request gets exactly its ``L`` beats, in request order);
    - the data engine never takes more write beats from a port than the requester gave, nor
      more than the accepted write requests asked for.

    Assumed: the port protocol of :class:`~.memctrl.ControllerProof` (no reset, ``req`` and
    ``wdata`` held until ready, length 1 .. ``max_burst``); write data all ones. Addresses,
    the read/write choice, byte enables, every ``valid`` and ``rdata.ready`` are free.

    The counters hold up to ``2**TRACK_BITS`` read requests per port (assumed: no more in the
    run; at the proof's depth fewer fit). Run it with ``script=MEMORY_AS_FLOPS``: the solver
    handles the store as flip-flops several times faster than as an array.

    Parameters
    ----------
    config : ArchConfig
        The controller's config.
    ports : int
        Requester ports.
    """

    def __init__(self, config: ArchConfig = READ_ORDER_CONFIG, ports: int = 1):
        self.config = config
        self.ports = ports

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        # Elaborated here, so the store's contents can be set before the toolchain reads them.
        dut, _ = elaborate_controller(m, cfg, self.ports, platform)
        dut.engine.mem.init = [sum(lw_tag(a) << (8 * k) for k in range(cfg.lw_bytes))
                               for a in range(cfg.sim_window_lw)]
        m.d.comb += [Assume(~ResetSignal()), dut.error_clear.eq(AnySeq(1))]
        for i, port in enumerate(dut.ports):
            for s in (port.req, port.wdata):
                m.d.comb += s.valid.eq(AnySeq(1))
            m.d.comb += [
                port.req.payload.eq(AnySeq(len(port.req.payload.as_value()))),
                port.wdata.payload.data.eq(-1),
                port.wdata.payload.strb.eq(-1),
                port.rdata.ready.eq(AnySeq(1)),
            ]
            assume_port_protocol(m, port, cfg, f"port{i}")
            self._read_order(m, port, f"port{i}")
            self._write_beats(m, port, dut.engine.wpop[i], f"port{i}")
        return m

    def _read_order(self, m, port, name):
        """The tagged request's beats, at their place in the port's read stream."""
        cfg = self.config
        req, rdata = port.req, port.rdata
        beat_bits = TRACK_BITS + max_burst(cfg).bit_length() + 1
        accepted = Signal(TRACK_BITS + 1, name=f"{name}_reads_accepted")
        owed = Signal(beat_bits, name=f"{name}_beats_owed")
        got = Signal(beat_bits, name=f"{name}_beats_got")
        track = Signal(TRACK_BITS, name=f"{name}_track")
        t_valid = Signal(name=f"{name}_t_valid")
        t_addr = Signal(chunk_addr_bits(cfg), name=f"{name}_t_addr")
        t_len = Signal.like(req.payload.length, name=f"{name}_t_len")
        t_start = Signal(beat_bits, name=f"{name}_t_start")
        m.d.comb += track.eq(AnyConst(TRACK_BITS))
        read_in = req.valid & req.ready & ~req.payload.write
        beat = rdata.valid & rdata.ready
        # The counters saturate below their top: a run that long ends the monitor's claims.
        with m.If(read_in & ~accepted[-1]):
            m.d.sync += [accepted.eq(accepted + 1), owed.eq(owed + req.payload.length)]
            with m.If(accepted == track):
                m.d.sync += [t_valid.eq(1), t_addr.eq(req.payload.addr),
                             t_len.eq(req.payload.length), t_start.eq(owed)]
        with m.If(beat):
            m.d.sync += got.eq(got + 1)
        m.d.comb += Assume(~(read_in & accepted[-1]))

        offset = Signal(beat_bits + 1, name=f"{name}_t_offset")
        addr = Signal(chunk_addr_bits(cfg) + 1, name=f"{name}_t_beat_addr")
        m.d.comb += [offset.eq(got - t_start), addr.eq(t_addr + offset)]
        mine = beat & t_valid & (got >= t_start) & (offset < t_len)
        outside = addr >= cfg.sim_window_lw
        data = rdata.payload.data
        # Byte 0 names the address; checking the other seven would only slow the solver.
        named = (data[:8] == addr[:8] + 1) | (data[:8] == 0xFF)
        m.d.comb += [
            Assert(~beat | (got < owed), f"{name}: a read beat no request owes"),
            Assert(~mine | (rdata.payload.error == outside),
                   f"{name}: read beat's error flag is not its address's"),
            Assert(~mine | outside | named,
                   f"{name}: read beat out of request order (data of another address)"),
            Assert(~mine | ~outside | (data == 0), f"{name}: out-of-window read beat not zero"),
        ]

    def _write_beats(self, m, port, wpop, name):
        """Write beats the engine takes never outrun what the requester gave or asked for."""
        cfg = self.config
        req, wdata = port.req, port.wdata
        bits = TRACK_BITS + max_burst(cfg).bit_length() + 2
        given = Signal(bits, name=f"{name}_wbeats_given")
        asked = Signal(bits, name=f"{name}_wbeats_asked")
        taken = Signal(bits, name=f"{name}_wbeats_taken")
        with m.If(wdata.valid & wdata.ready):
            m.d.sync += given.eq(given + 1)
        with m.If(req.valid & req.ready & req.payload.write):
            m.d.sync += asked.eq(asked + req.payload.length)
        with m.If(wpop):
            m.d.sync += taken.eq(taken + 1)
        m.d.comb += [
            Assert(~wpop | (taken < given), f"{name}: write beat taken the requester never gave"),
            Assert(~wpop | (taken < asked), f"{name}: write beat taken no request asked for"),
        ]
