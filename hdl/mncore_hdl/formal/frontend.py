"""Proof harness of a port frontend alone: the head it shows the back end is one legal burst."""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, ResetSignal, Signal

from ..arch import ArchConfig
from ..memctrl.controller import queue_depth
from ..memctrl.reorder import ReorderFrontend
from ..memctrl.requester import PortFrontend
from .backend import head_len_legal, one_burst
from .memctrl import PROOF_CONFIG, assume_port_protocol
from .primitives import AnySeq, Assert, Assume, free_inputs

__all__ = ["HeadContractProof", "assume_engine_contract", "build_frontend",
           "free_scheduler_side"]


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

    Returns the harness's counts of the beats owed, ``{"read": ..., "write": ...}``."""
    bits = 2 * max(1, (fe.slots * config.timing.burst_length).bit_length()) + 2
    counts = {}
    for strobe, write, name in ((fe.rpush, 0, "read"), (fe.wpop, 1, "write")):
        owed = Signal(bits, name=f"{name}_beats_owed")
        add = Signal.like(owed)
        m.d.comb += [strobe.eq(AnySeq(1)), Assume(~strobe | (owed != 0))]
        with m.If(fe.issue & (fe.head.head_write == write)):
            m.d.comb += add.eq(fe.head.head_len)
        m.d.sync += owed.eq(owed + add - strobe)
        counts[name] = owed
    return counts


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
