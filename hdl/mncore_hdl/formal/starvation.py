"""Proof harness of no starvation in cycles: an eligible head chunk issues within a bound."""

from __future__ import annotations

import dataclasses
import math

from amaranth.hdl import Elaboratable, Module, ResetSignal, Signal

from ..arch import ArchConfig
from ..memctrl.controller import MemoryController
from ..memctrl.reorder import ReorderFrontend
from .arbiter import passes_allowed
from .memctrl import assume_port_protocol, elaborate_controller
from .primitives import AnySeq, Assert, Assume
from .readstream import READ_ORDER_CONFIG
from .reorder_state import reorder_invariants

__all__ = ["STARVATION_CONFIG", "StarvationProof", "chunk_bound_cycles", "gap_cycles",
           "issue_cycles", "refresh_cycles", "starvation_bound_cycles"]

#: Every rule 1-2 cycles (READ_ORDER_CONFIG's timing), tREFI 16: two refreshes fall inside a
#: wait, and the bound (below) stays inside a BMC depth the solver reaches in seconds.
STARVATION_CONFIG = READ_ORDER_CONFIG.replace(
    timing=dataclasses.replace(READ_ORDER_CONFIG.timing, trefi=16))


def _precharge_wait(config: ArchConfig) -> int:
    """Most cycles before an open bank may be precharged: tRAS, write recovery, tRTP."""
    t = config.timing
    return max(t.tras, t.burst_length + t.twr, t.trtp)


def issue_cycles(config: ArchConfig) -> int:
    """Most cycles one granted head needs, without refresh, from its grant to its column command.

    A row conflict: the precharge wait (``max(tRAS, BL + tWR, tRTP)``), PRE, ``tRP``, an ACT
    held by tRRD / tFAW (at most ``max(tRRD, tFAW)``), ``tRCD``, then the column command cycle.
    The data bus and turnaround (``BL + max(tWTR, tRTW, tCCD)`` after the last burst) run
    meanwhile; the larger of the two chains counts.
    """
    t = config.timing
    row = _precharge_wait(config) + t.trp + max(t.trrd, t.tfaw) + t.trcd
    bus = t.burst_length + max(t.twtr, t.trtw, t.tccd)
    return max(row, bus) + 1


def refresh_cycles(config: ArchConfig) -> int:
    """Most cycles one refresh stops the scheduler: the precharge wait, a PRE per other open
    bank, ``tRP``, the REF cycle and ``tRFC``."""
    t = config.timing
    return _precharge_wait(config) + (config.banks - 1) + t.trp + 1 + t.trfc


def starvation_bound_cycles(config: ArchConfig, ports: int) -> int:
    """Most cycles a port's eligible head waits before its column command issues.

    The head waits for at most ``passes_allowed(config, ports)`` other ports' issues and then
    its own, each at most :func:`issue_cycles` (a refresh that closes the row is paid by the
    next one of them again, hence a full row change each). Refresh comes on top: a REF falls
    due every ``tREFI`` cycles whatever the scheduler does, and each stops it for at most
    :func:`refresh_cycles`. A wait of ``N`` cycles meets at most ``ceil(N / tREFI)`` refreshes,
    so the bound is the least ``N`` with ``N >= W + ceil(N / tREFI) * R`` (``W`` the issues'
    cycles, ``R`` a refresh's), found by iteration from ``N = W``.

    Raises ``ValueError`` when a refresh takes ``tREFI`` or more (no progress is assured).
    At :data:`STARVATION_CONFIG` with 2 ports: ``issue_cycles`` 7, ``refresh_cycles`` 8,
    ``W`` 14, bound 30 (FR-FCFS with cap 1 the same). The worst wait the solver finds in
    order is 16 to 18 cycles: the sum charges every issue a row conflict after a write.
    With ``fr_fcfs`` the head is the port's, not one chunk's (the frontend may show a younger
    chunk): :func:`chunk_bound_cycles` bounds a chunk's wait.
    """
    return _with_refresh(config, (passes_allowed(config, ports) + 1) * issue_cycles(config))


def gap_cycles(config: ArchConfig) -> int:
    """Most cycles the controller goes without an issue while some port is eligible.

    One issue's :func:`issue_cycles` with refresh on top, as in
    :func:`starvation_bound_cycles`: the least ``N >= issue_cycles + ceil(N / tREFI) * R``.
    At :data:`STARVATION_CONFIG`: 15.
    """
    return _with_refresh(config, issue_cycles(config))


def _with_refresh(config: ArchConfig, work: int) -> int:
    """The least ``N >= work + ceil(N / tREFI) * refresh_cycles``."""
    t = config.timing
    r = refresh_cycles(config)
    if r >= t.trefi:
        raise ValueError(f"A refresh takes up to {r} cycles, expected fewer than tREFI "
                         f"({t.trefi}): no bound on a wait")
    bound = work
    while bound < work + math.ceil(bound / t.trefi) * r:
        bound = work + math.ceil(bound / t.trefi) * r
    return bound


def chunk_bound_cycles(config: ArchConfig, ports: int) -> int:
    """With ``fr_fcfs``: most cycles a port's eligible oldest chunk waits before it issues.

    A chunk is *eligible* when it is its port's oldest queued chunk and legal (its write
    beats all received, or its read's reorder-buffer slot free). Three proofs combine, each
    a test of ``sim/formal/test_formal_starvation.py``:

    1. the frontend alone (:class:`~.reorder.ReorderCapProof`): an eligible oldest chunk stays
       eligible until it issues and keeps its port's ``head_eligible`` up (which, once up,
       stays up until the port issues), and at most ``c = scheduler_starvation_cap`` of the
       port's issues before its own are of younger chunks;
    2. the arbiter (:class:`~.arbiter.ArbiterProof`, assuming what 1 proves of the requests):
       while a port's request is up, at most ``p =`` :func:`~.arbiter.passes_allowed` other
       ports issue before it does;
    3. the whole controller (:class:`StarvationProof` with ``any_port``): while some port is
       eligible, an issue comes within ``G =`` :func:`gap_cycles` cycles.

    From the cycle the chunk is eligible its port requests until the chunk issues, so at
    most ``(c + 1) * (p + 1)`` issues come before and with the chunk's (1 and 2), each at
    most ``G`` waiting cycles after the one before (3): the chunk waits at most
    ``(c + 1) * (p + 1) * (G + 1) - 1`` cycles. At :data:`STARVATION_CONFIG` with window 4,
    cap 1 and 2 ports: ``p`` 1, ``G`` 15, bound 63.

    In order a port shows its one oldest chunk and :func:`starvation_bound_cycles` is proved
    on the whole controller directly; this function returns it.
    """
    if config.scheduler != "fr_fcfs":
        return starvation_bound_cycles(config, ports)
    issues = (config.scheduler_starvation_cap + 1) * (passes_allowed(config, ports) + 1)
    return issues * (gap_cycles(config) + 1) - 1


class StarvationProof(Elaboratable):
    """The whole controller with a wait counter per port: an eligible head issues in time.

    Asserted, per port: once its head chunk is eligible (the frontend's ``head_eligible``,
    which the arbiter sees as its request), the scheduler issues that port's head (column
    command, or the out-of-window drop) within ``limit`` cycles; a cycle of waiting is one
    with the head eligible and not issued. With ``fr_fcfs`` the port is eligible when any
    chunk of its window is legal, and the head it shows may change. With ``any_port`` the
    controller's bound is asserted instead: while some port is eligible, some port issues
    within ``limit`` cycles (the step :func:`chunk_bound_cycles` builds on). Assumed: the
    port protocol of :class:`~.memctrl.ControllerProof` only (no reset, ``req`` and
    ``wdata`` held until ready, length 1 .. ``max_burst``); every address, ``valid``,
    payload and ``rdata.ready`` free.
    No fairness assumption is needed: an eligible chunk stays eligible until issued (a read's
    FIFO credits are reserved when it becomes eligible), so a requester that never takes its
    read data only keeps its own next chunk from becoming eligible.

    Parameters
    ----------
    config : ArchConfig
        The controller's config (``scheduler`` picks the arbiter).
    ports : int
        Requester ports.
    limit : int or None
        Cycles asserted (default :func:`starvation_bound_cycles`, with ``any_port``
        :func:`gap_cycles`; the tightness test asks less).
    any_port : bool
        Assert the gap between issues while any port is eligible, not each port's wait.
    frontend_invariants : bool
        With ``fr_fcfs``, assume each port's reorder-frontend invariants
        (:func:`~.reorder_state.reorder_invariants`, proved of the frontend alone under the
        assumptions the controller gives it): the gap bound then closes by k-induction at
        k = ``limit + 1``; without them its step starts from frontend states no run reaches.
    """

    def __init__(self, config: ArchConfig = STARVATION_CONFIG, ports: int = 2,
                 limit: int | None = None, any_port: bool = False,
                 frontend_invariants: bool = False):
        self.config = config
        self.ports = ports
        self.any_port = any_port
        self.frontend_invariants = frontend_invariants
        if limit is None:
            limit = gap_cycles(config) if any_port else starvation_bound_cycles(config, ports)
        self.limit = limit

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        # Elaborated here so the harness reaches the arbiter's requests (the eligible heads).
        readable = self.frontend_invariants and cfg.scheduler == "fr_fcfs"
        dut, inner = elaborate_controller(m, cfg, self.ports, platform,
                                          _ReadableController if readable else MemoryController)
        if readable:
            for i in range(self.ports):
                fe = inner.submodules[f"port{i}"]
                fe.elaborate(platform)
                reorder_invariants(m, fe, None, Assume)
        eligible = inner.submodules["arbiter"].requests
        sched = dut.scheduler
        m.d.comb += [Assume(~ResetSignal()), dut.error_clear.eq(AnySeq(1))]
        for i, port in enumerate(dut.ports):
            for s in (port.req, port.wdata):
                m.d.comb += [s.valid.eq(AnySeq(1)),
                             s.payload.eq(AnySeq(len(s.payload.as_value())))]
            m.d.comb += port.rdata.ready.eq(AnySeq(1))
            assume_port_protocol(m, port, cfg, f"port{i}")
        if self.any_port:
            self._wait(m, eligible.any() & ~sched.issue, "gap", "some port eligible, no issue for")
        else:
            for i in range(self.ports):
                waiting = eligible[i] & ~(sched.issue & (sched.issue_port == i))
                self._wait(m, waiting, f"port{i}", f"port {i}: eligible head waited")
        return m

    def _wait(self, m, waiting, name, what):
        """Count the cycles of ``waiting`` in a row; assert at most ``limit``."""
        waited = Signal(range(self.limit + 2), name=f"{name}_waited")
        with m.If(~waiting):
            m.d.sync += waited.eq(0)
        with m.Elif(waited <= self.limit):
            m.d.sync += waited.eq(waited + 1)
        m.d.comb += Assert(waited <= self.limit, f"{what} more than {self.limit} cycles")


class _ReadableFrontend(ReorderFrontend):
    """A reordering frontend elaborated once: the harness elaborates it first, to read its
    state, and the toolchain gets the same module."""

    def elaborate(self, platform):
        if getattr(self, "_module", None) is None:
            self._module = super().elaborate(platform)
        return self._module


class _ReadableController(MemoryController):
    """The controller with frontends whose state a harness reads."""

    reorder_frontend = _ReadableFrontend
