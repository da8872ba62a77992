"""Proof harness of the port arbiters: a waiting head is passed by a bounded number of others."""

from __future__ import annotations

import itertools

from amaranth.hdl import Array, Const, Elaboratable, Module, Mux, ResetSignal, Signal

from ..arch import ArchConfig
from ..memctrl.arbiter import RoundRobin
from ..memctrl.controller import head_ahead
from ..memctrl.frfcfs import FrFcfs
from .memctrl import PROOF_CONFIG
from .primitives import Assert, Assume, free_inputs

__all__ = ["ArbiterProof", "GrantProof", "free_arbiter", "passes_allowed"]


def passes_allowed(config: ArchConfig, ports: int) -> int:
    """Most column commands of other ports that may issue while one port's head is eligible.

    Round robin: ``ports - 1`` (every other port once). FR-FCFS: its starvation cap (then the
    port is *starving*), then each other port that is starving too, once: only starving ports
    go before a starving one, a served port needs ``cap`` further issues to starve again, and
    the port served last before this one starved is not starving: ``cap + ports - 2``. The
    proof checks this bound is tight (one less fails).
    """
    if ports == 1:
        return 0
    if config.scheduler == "fr_fcfs":
        return config.scheduler_starvation_cap + ports - 2
    return ports - 1


def free_arbiter(m: Module, config: ArchConfig, ports: int, ahead: int):
    """Add the arbiter of ``config.scheduler`` to ``m`` (submodule ``arbiter``) with every
    input free each cycle (no reset after the start); returns it."""
    if config.scheduler == "fr_fcfs":
        m.submodules.arbiter = arb = FrFcfs(config, ports, ahead)
    else:
        m.submodules.arbiter = arb = RoundRobin(ports)
    free_inputs(m, arb)
    m.d.comb += Assume(~ResetSignal())
    return arb


class ArbiterProof(Elaboratable):
    """The arbiter of ``config.scheduler`` with every input free but the eligibility rule.

    Assumed: a port's request (its head chunk is eligible), once up, stays up until the port
    is served (``advance`` with ``grant`` on it), as :class:`~..memctrl.requester.PortFrontend`
    guarantees; ``advance`` only while some port requests. Free every cycle: the requests'
    rise, ``advance``, and for FR-FCFS every head, bank state, bus and direction input.
    Asserted, per port: while its request is up, at most :func:`passes_allowed` other ports
    are served before it.

    Parameters
    ----------
    config : ArchConfig
        ``scheduler`` (``in_order``: :class:`RoundRobin`; ``fr_fcfs``: :class:`FrFcfs`) and
        ``scheduler_starvation_cap``.
    ports : int
        Requester ports.
    limit : int or None
        The bound asserted (default :func:`passes_allowed`; the tightness test asks one less).
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG, ports: int = 3,
                 limit: int | None = None):
        self.config = config
        self.ports = ports
        self.limit = passes_allowed(config, ports) if limit is None else limit

    def elaborate(self, platform):
        m = Module()
        n = self.ports
        arb = free_arbiter(m, self.config, n, ahead=0)
        m.d.comb += Assume(~arb.advance | arb.valid)
        limit = self.limit
        for i in range(n):
            served = arb.advance & (arb.grant == i)
            waiting = arb.requests[i] & ~served
            held = Signal(name=f"held{i}")
            passed = Signal(range(limit + 2), name=f"passed_by_others{i}")
            m.d.sync += held.eq(waiting)
            m.d.comb += Assume(~held | arb.requests[i])
            with m.If(~waiting):
                m.d.sync += passed.eq(0)
            with m.Elif(arb.advance & (passed <= limit)):
                m.d.sync += passed.eq(passed + 1)
            m.d.comb += Assert(passed <= limit,
                               f"port {i} passed by more than {limit} others (starved)")
            self._invariant(m, arb, i, held, passed)
        if isinstance(arb, RoundRobin):
            m.d.comb += Assert(arb.last < n, "round-robin pointer out of range")
        else:
            for i, j, k in itertools.permutations(range(n), 3):
                m.d.comb += Assert(~(arb.older(i, j) & arb.older(j, k)) | arb.older(i, k),
                                   f"ages of ports {i}, {j}, {k} not an order")
        return m

    def _invariant(self, m, arb, i, held, passed):
        """What k-induction needs of port ``i``: its pass count agrees with the arbiter.

        Round robin: ``passed + d <= ports - 1``, ``d`` the ports strictly between the
        pointer (the port served last) and ``i`` in round-robin order, since each port served
        while ``i`` waits lies there and moves the pointer past itself. FR-FCFS: the
        arbiter's own count is the harness's, saturated at the cap (both count the issues of
        other ports while ``i`` waits); once passed at all, ``i`` has been passed beyond the
        cap at most ``ports - 2`` minus the waiting ports older than it (a port passes a
        starving one only if it is starving and older, and is the youngest after; the one
        that passed first is younger already); and the age matrix is an order.
        """
        n = self.ports
        m.d.comb += Assert(held | (passed == 0), f"port {i} counted passes while not waiting")
        if isinstance(arb, RoundRobin):
            between = Array(Const((i - last - 1) % n, range(n)) for last in range(n))
            m.d.comb += Assert(~held | (passed + between[arb.last] <= n - 1),
                               f"port {i} passed by more ports than lie before it")
        else:
            cap = self.config.scheduler_starvation_cap
            older = sum(arb.requests[j] & arb.older(j, i) for j in range(n) if j != i)
            beyond = Mux(passed > cap, passed - cap, 0)
            m.d.comb += [
                Assert(arb.passed[i] == Mux(passed < cap, passed, cap),
                       f"port {i} pass count disagrees with the arbiter's"),
                Assert(~held | (passed == 0) | (beyond + older <= n - 2),
                       f"port {i} passed since it starved by more than the older ports"),
            ]


class GrantProof(Elaboratable):
    """The arbiter of ``config.scheduler`` grants only a port that requests.

    The arbiter's half of the contract :class:`~.backend.BackendProof` assumes: with
    ``valid``, ``grant`` names a port whose head is eligible (its request is up), so the
    granted head is one the frontend vouches for (:class:`~.frontend.HeadContractProof`).
    Every input free each cycle (the requests, ``advance``, and for FR-FCFS every head, bank,
    bus and direction input); asserted for all time by k-induction, with the round robin's
    pointer inside its range as an invariant.

    Parameters
    ----------
    config : ArchConfig
        ``scheduler`` (``in_order``: :class:`RoundRobin`; ``fr_fcfs``: :class:`FrFcfs`).
    ports : int
        Requester ports.
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG, ports: int = 3):
        self.config = config
        self.ports = ports

    def elaborate(self, platform):
        m = Module()
        n = self.ports
        arb = free_arbiter(m, self.config, n, head_ahead(self.config, n))
        if isinstance(arb, RoundRobin):
            m.d.comb += Assert(arb.last < n, "round-robin pointer out of range")
        m.d.comb += Assert(~arb.valid | arb.requests.bit_select(arb.grant, 1),
                           "grant to a port that does not request")
        return m
