"""Proof harnesses of the reorder frontend: its state's invariants, and the cap on passes."""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Fragment, Module, ResetSignal, Signal

from ..arch import ArchConfig
from ..memctrl.reorder import ReorderFrontend
from .frontend import assume_engine_contract, free_scheduler_side
from .memctrl import assume_port_protocol
from .primitives import Assert, Assume
from .readstream import READ_ORDER_CONFIG
from .reorder_state import PARTS, reorder_invariants

__all__ = ["REORDER_CONFIG", "ReorderCapProof", "ReorderInvariantProof", "invariant_names",
           "step_shares"]

#: The frontend's proof config: READ_ORDER_CONFIG's geometry (2 banks, 4 LW rows) with the
#: fr_fcfs scheduler, its least window (4) and cap 1. Timing does not matter here: every
#: scheduler-side input is free.
REORDER_CONFIG = READ_ORDER_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                           scheduler_starvation_cap=1)


def frontend_alone(m: Module, config: ArchConfig, frontend_config: ArchConfig, platform):
    """One :class:`ReorderFrontend` of ``frontend_config`` in ``m``, elaborated here (so the
    harness reaches its state), under the assumptions of the frontend proofs: no reset, the
    port protocol on the requester side, ``issue`` only while ``head_eligible``, the data
    engine's contract; every other input free. Returns the frontend and the harness's records
    of the beats owed (:func:`~.frontend.assume_engine_contract`)."""
    fe = ReorderFrontend(frontend_config, config.scheduler_window)
    fe._MustUse__silence = True
    m.submodules.frontend = fe.elaborate(platform)
    m.d.comb += Assume(~ResetSignal())
    free_scheduler_side(m, fe)
    assume_port_protocol(m, fe.bus, config, "port")
    return fe, assume_engine_contract(m, fe, config)


class ReorderInvariantProof(Elaboratable):
    """One :class:`~..memctrl.reorder.ReorderFrontend` alone: its state's invariants hold.

    The assumptions of :class:`ReorderCapProof`; asserted, the invariants of
    :func:`~.reorder_state.reorder_invariants` named in ``parts`` (the write buffer's and the
    window's hold on their own, by induction at k = 1).

    Parameters
    ----------
    config : ArchConfig
        The frontend's config (window ``scheduler_window``).
    parts : tuple of str
        Which of :data:`~.reorder_state.PARTS`.
    frontend_config : ArchConfig or None
        The config the frontend is built from (default ``config``).
    step : slice or None
        None: every invariant asserted (``mode="bmc"`` checks them from reset, ``"prove"``
        at k = 1 is their whole induction step). A slice of :func:`invariant_names`: only
        those asserted, each in a cycle after one where all of ``parts`` held, so that at
        k = 1 the run proves that share of the induction step; the shares of
        :func:`step_shares` together are the whole step (a solver closes them one by one,
        not all at once), and the check from reset is the base case.
    """

    def __init__(self, config: ArchConfig = REORDER_CONFIG, parts: tuple[str, ...] = PARTS,
                 frontend_config: ArchConfig | None = None, step: slice | None = None):
        self.config = config
        self.parts = parts
        self.frontend_config = config if frontend_config is None else frontend_config
        self.step = step

    def elaborate(self, platform):
        m = Module()
        fe, owed = frontend_alone(m, self.config, self.frontend_config, platform)
        if self.step is None:
            reorder_invariants(m, fe, owed["read"], Assert, self.parts)
            return m
        # the step of some invariants from all of them a cycle before: for every ``step``
        # together, the whole set's induction step (each run checks a share)
        held = _collect(m, fe, owed["read"], self.parts)
        before = Signal(name="invariants_held_before")
        m.d.sync += before.eq(Cat(c for c, _ in held).all())
        m.d.comb += [Assert(~before | c, n) for c, n in held[self.step]]
        return m


def invariant_names(config: ArchConfig = REORDER_CONFIG, parts: tuple[str, ...] = PARTS):
    """The names of the invariants of ``parts`` at ``config``, in :class:`ReorderInvariantProof`'s
    order (a ``step`` slice counts in it)."""
    m = Module()
    fe, owed = frontend_alone(m, config, config, None)
    names = [name for _, name in _collect(m, fe, owed["read"], parts)]
    Fragment.get(m, None)       # elaborated, so nothing is left unused
    return names


def _collect(m: Module, fe, read_owed, parts) -> list:
    """The invariants of ``parts`` as ``(condition, name)`` pairs, none of them asserted."""
    held = []

    def keep(condition, name):
        held.append((condition, name))
        return []

    reorder_invariants(m, fe, read_owed, keep, parts)
    return held


def step_shares(config: ArchConfig = REORDER_CONFIG, parts: tuple[str, ...] = PARTS):
    """The induction step of the invariants cut into shares a solver closes: runs of
    invariants of one kind (the name's first word), but each slot's ghost equation and the
    level equations (the in-flight queue's, the harness's reads owed) alone. Returns
    ``[(slice, first name), ...]``."""
    names = invariant_names(config, parts)

    def kind(name):
        alone = any(word in name for word in ("ghost", "level"))
        return name if alone else name.split()[0]

    shares, start = [], 0
    for k in range(1, len(names) + 1):
        if k == len(names) or kind(names[k]) != kind(names[start]):
            shares.append((slice(start, k), names[start]))
            start = k
    return shares


class ReorderCapProof(Elaboratable):
    """One :class:`~..memctrl.reorder.ReorderFrontend` alone, with the scheduler side free.

    A chunk is *eligible* when it is the port's oldest queued chunk (window entry 0) and it
    is legal (its write beats all received, or its read's reorder-buffer slot free; nothing
    older to overlap). Asserted:

    - once eligible, the oldest chunk stays eligible until it issues;
    - while it is eligible the port shows ``head_eligible`` (the arbiter's request), and
      that request, once up, stays up until the port issues (what
      :class:`~.arbiter.ArbiterProof` assumes of every port);
    - while it is eligible at most ``limit`` issues of the port are of younger chunks
      (default ``scheduler_starvation_cap``): its next issue after them is its own;

    and, as invariants, that the harness's pass count agrees with the frontend's cap counter.
    With ``invariants``, the frontend's state invariants
    (:func:`~.reorder_state.reorder_invariants`) are asserted too (``"assert"``) or assumed
    (``"assume"``: where :class:`ReorderInvariantProof` proves them).

    Assumed: the port protocol on the requester side (no reset, ``req`` and ``wdata`` held
    until ready, length 1 .. ``max_burst``); ``issue`` only while ``head_eligible``; the data
    engine's contract: ``rpush`` only while the issued reads are owed beats, ``wpop`` only
    while the issued writes are. Free every cycle: the requester's addresses, lengths,
    directions, data and every ``valid`` / ``ready``; ``issue``; the banks' states,
    ``bus_free``, ``rd_allowed``, ``wr_allowed``; the read data pushed.

    Parameters
    ----------
    config : ArchConfig
        The asserted ``scheduler_starvation_cap``, the window (``scheduler_window``) and the
        geometry.
    limit : int or None
        Younger issues allowed (default the cap; the tightness test asks one less).
    frontend_config : ArchConfig or None
        The config the frontend is built from (default ``config``); the mutant test builds
        one whose cap is never reached.
    invariants : str or None
        None, ``"assert"`` or ``"assume"`` (above).
    """

    def __init__(self, config: ArchConfig = REORDER_CONFIG, limit: int | None = None,
                 frontend_config: ArchConfig | None = None, invariants: str | None = None):
        if invariants not in (None, "assert", "assume"):
            raise ValueError(f"invariants must be None, 'assert' or 'assume', not {invariants!r}")
        self.config = config
        self.limit = config.scheduler_starvation_cap if limit is None else limit
        self.frontend_config = config if frontend_config is None else frontend_config
        self.invariants = invariants

    def elaborate(self, platform):
        m = Module()
        fe, owed = frontend_alone(m, self.config, self.frontend_config, platform)
        if self.invariants is not None:
            reorder_invariants(m, fe, owed["read"],
                               Assert if self.invariants == "assert" else Assume)
        own = fe.issue & (fe.selected == 0)
        eligible = fe.oldest_legal
        waiting = eligible & ~own
        held = Signal(name="oldest_was_waiting")
        requested = Signal(name="request_was_waiting")
        passed = Signal(range(self.limit + 2), name="oldest_passed")
        m.d.sync += [held.eq(waiting), requested.eq(fe.head_eligible & ~fe.issue)]
        with m.If(~waiting):
            m.d.sync += passed.eq(0)
        with m.Elif(fe.issue & (passed <= self.limit)):
            m.d.sync += passed.eq(passed + 1)
        m.d.comb += [
            Assert(~held | eligible, "the eligible oldest chunk lost its eligibility"),
            Assert(~eligible | fe.head_eligible, "an eligible oldest chunk and no request"),
            Assert(~requested | fe.head_eligible, "the port's request fell before an issue"),
            Assert(passed <= self.limit,
                   f"the eligible oldest chunk passed by more than {self.limit} younger"),
            # invariants: the harness counts what the frontend's cap counter counts
            Assert(held | (passed == 0), "passes counted while the oldest chunk did not wait"),
            Assert(passed <= fe.passed, "more passes counted than the frontend's cap counter"),
        ]
        return m
