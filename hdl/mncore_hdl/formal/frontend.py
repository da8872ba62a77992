"""Proof harness of a port frontend alone: the head it shows the back end is one legal burst."""

from __future__ import annotations

from amaranth.hdl import Array, Elaboratable, Module, Mux, ResetSignal, Signal

from ..arch import ArchConfig
from ..memctrl.controller import queue_depth
from ..memctrl.reorder import ReorderFrontend
from ..memctrl.requester import PortFrontend
from .backend import head_len_legal, one_burst
from .memctrl import PROOF_CONFIG, assume_port_protocol
from .primitives import AnySeq, Assert, Assume, free_inputs

__all__ = ["HeadContractProof", "assume_engine_contract", "build_frontend",
           "free_scheduler_side", "reads_owed"]


def build_frontend(config: ArchConfig, platform=None):
    """The port frontend the controller builds for ``config`` (its queue depth), elaborated
    here so a harness reaches its state; returns ``(frontend, module)``."""
    depth = queue_depth(config, 1)
    if config.scheduler == "fr_fcfs":
        fe = ReorderFrontend(config, depth)
    else:
        fe = PortFrontend(config, depth)
    fe._MustUse__silence = True
    return fe, fe.elaborate(platform)


def free_scheduler_side(m: Module, fe) -> None:
    """Leave a frontend's requester side and its scheduler side free, but for
    ``issue`` only while ``head_eligible`` (the scheduler issues only the granted port, and
    the arbiter grants only an eligible one). ``rpush`` and ``wpop`` are left to
    :func:`assume_engine_contract`."""
    free_inputs(m, fe, skip=("rpush", "wpop"))
    m.d.comb += Assume(~fe.issue | fe.head_eligible)


def assume_engine_contract(m: Module, fe, config: ArchConfig) -> dict:
    """The data engine's contract: ``rpush`` / ``wpop`` free, but only while the issued reads
    / writes owe beats (of a :class:`ReorderFrontend`, whose reorder buffer needs it).

    The write beats owed are a count; the read beats owed are the issued reads' lengths in
    issue order (:func:`reads_owed`: the engine returns each read's beats in issue order, so
    ``rpush`` is allowed while that queue is not empty, the same rule as a count of beats
    owed, kept per read so the frontend's invariants compare it entry by entry).

    Returns the harness's records of the beats owed, ``{"read": ..., "write": ...}``."""
    bits = 2 * max(1, (fe.slots * config.timing.burst_length).bit_length()) + 2
    owed = Signal(bits, name="write_beats_owed")
    add = Signal.like(owed)
    m.d.comb += [fe.wpop.eq(AnySeq(1)), Assume(~fe.wpop | (owed != 0))]
    with m.If(fe.issue & fe.head.head_write):
        m.d.comb += add.eq(fe.head.head_len)
    m.d.sync += owed.eq(owed + add - fe.wpop)
    reads = reads_owed(m, fe, config)
    m.d.comb += [fe.rpush.eq(AnySeq(1)), Assume(~fe.rpush | (reads["level"] != 0))]
    return {"read": reads, "write": owed}


def reads_owed(m: Module, fe, config: ArchConfig) -> dict:
    """The harness's queue of the issued reads whose beats the data engine owes: a ring of
    ``fe.slots`` lengths (pushed by a read's issue, popped by its last beat), its pointers and
    level, and the beats of the oldest one pushed so far. A read issued while the ring is full
    is not recorded: ``full_issue`` marks it (the frontend's invariants assert it never
    happens). Returns the ring's signals by name."""
    ns, bl = fe.slots, config.timing.burst_length
    lens = [Signal(range(bl + 1), name=f"owed_len{i}") for i in range(ns)]
    produce = Signal(range(ns), name="owed_produce")
    consume = Signal(range(ns), name="owed_consume")
    level = Signal(range(ns + 1), name="owed_level")
    beat = Signal(range(bl), name="owed_beat")
    issued = fe.issue & ~fe.head.head_write
    push = issued & (level != ns)
    last = fe.rpush & (beat + 1 == Array(lens)[consume])
    m.d.sync += [ln.eq(Mux(push & (produce == i), fe.head.head_len, ln))
                 for i, ln in enumerate(lens)]
    m.d.sync += [
        produce.eq(Mux(push, Mux(produce == ns - 1, 0, produce + 1), produce)),
        consume.eq(Mux(last, Mux(consume == ns - 1, 0, consume + 1), consume)),
        level.eq(level + push - last),
        beat.eq(Mux(fe.rpush, Mux(last, 0, beat + 1), beat)),
    ]
    return {"lens": lens, "produce": produce, "consume": consume, "level": level,
            "beat": beat, "full_issue": issued & (level == ns)}


class HeadContractProof(Elaboratable):
    """One port frontend of ``config`` alone: the head it offers is one column burst.

    Asserted: while ``head_eligible`` (the arbiter's request), the head chunk is 1 .. burst
    length LWs inside one burst-aligned block (:func:`~.backend.head_len_legal`), the
    contract :class:`~.backend.BackendProof` assumes of the granted head. With it, as
    invariants for k-induction, the same of every chunk the frontend holds (the chunker's,
    and with ``fr_fcfs`` every window entry's). Assumed: the port protocol on the requester
    side, ``issue`` only while ``head_eligible`` and the data engine's contract; every other
    input free.

    ``rpush`` and ``wpop`` are free too: the contract holds whatever the data engine does.

    Parameters
    ----------
    config : ArchConfig
        The controller's config (``scheduler`` chooses the frontend, as the controller does);
        its burst length is the contract's.
    frontend_config : ArchConfig or None
        The config the frontend is built from (default ``config``; the mutant test builds one
        with a longer burst).
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG,
                 frontend_config: ArchConfig | None = None):
        self.config = config
        self.frontend_config = config if frontend_config is None else frontend_config

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        fe, m.submodules.frontend = build_frontend(self.frontend_config, platform)
        m.d.comb += Assume(~ResetSignal())
        free_scheduler_side(m, fe)
        assume_port_protocol(m, fe.bus, cfg, "port")
        m.d.comb += [fe.rpush.eq(AnySeq(1)), fe.wpop.eq(AnySeq(1))]
        m.d.comb += Assert(~fe.head_eligible | head_len_legal(fe.head, cfg),
                           "the eligible head is not one column burst")
        self._invariants(m, fe)
        return m

    def _invariants(self, m, fe):
        """Every chunk held is one burst; the request being cut has beats left."""
        cfg = self.config
        if isinstance(fe, ReorderFrontend):
            for k, e in enumerate(fe.entries):
                m.d.comb += Assert(~e.valid | one_burst(e.addr, e.len, cfg),
                                   f"window entry {k} is not one column burst")
            cut_valid, cut_rem = fe.cut["valid"], fe.cut["rem"]
        else:
            cut_valid, cut_rem = fe.chunk_valid, fe.chunk_rem
        m.d.comb += Assert(~cut_valid | (cut_rem >= 1), "a request being cut with no beats left")
