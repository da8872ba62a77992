"""Formal proofs (SymbiYosys) of no starvation: every eligible chunk issues within a bound.

In order, the cycle bound is proved on the whole controller. With the reordering fr_fcfs
frontend it is the composition of three proofs (``chunk_bound_cycles`` in
``mncore_hdl.formal.starvation`` states the formula): the frontend alone passes its eligible
oldest chunk at most ``scheduler_starvation_cap`` times, the arbiter passes an eligible port
a bounded number of times, and the whole controller issues some chunk within ``gap_cycles``
while a port is eligible. All three hold for all time by k-induction: the first and the
third given the frontend's state invariants (``formal/reorder_state.py``), whose own
induction runs here too, its step cut into shares a solver closes in seconds each (one test
a share). A tightness test and a mutant go with each proof.
"""


import re

import pytest
from formal_support import explain, require_formal_tools
from mncore_hdl.formal.arbiter import ArbiterProof, passes_allowed
from mncore_hdl.formal.readstream import MEMORY_AS_FLOPS
from mncore_hdl.formal.reorder import (
    ReorderCapProof,
    ReorderInvariantProof,
    invariant_names,
    step_shares,
)
from mncore_hdl.formal.runner import BOOLECTOR, prove
from mncore_hdl.formal.starvation import (
    STARVATION_CONFIG,
    StarvationProof,
    chunk_bound_cycles,
    gap_cycles,
    starvation_bound_cycles,
)
from mncore_hdl.memctrl import controller
from mncore_hdl.memctrl import reorder as reorder_rtl
from mncore_hdl.memctrl.arbiter import RoundRobin


@pytest.fixture(scope="module", autouse=True)
def _need_tools():
    require_formal_tools()


#: The invariants' parts of the reorder buffer's proofs (the window's with them).
READ_PARTS = ("window", "read")

#: The invariants' parts of the write buffer's proofs (the window's with them).
WRITE_PARTS = ("window", "write")

#: Two ports: the cycle bound (30 at STARVATION_CONFIG) inside a depth the solver reaches.
CYCLE_PORTS = 2

#: BMC depth of the cycle-bound proofs: the bound (30) plus 10 cycles of margin, so a wait
#: that starts anywhere in the first 10 cycles (with or without a refresh owed) runs past it.
CYCLE_DEPTH = 40

#: A wait the solver reaches at STARVATION_CONFIG in order with 2 ports (it finds a trace
#: of WORST_WAIT_FOUND + 1 cycles): how tight the bound of 30 is.
WORST_WAIT_FOUND = 15


def _cycle_config():
    return STARVATION_CONFIG.replace(scheduler="in_order")


def _fr_config():
    """fr_fcfs at its least window (4) and cap 1: the config both fr_fcfs proofs share."""
    return STARVATION_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                     scheduler_starvation_cap=1)


#: Induction length of the in-order cycle bound: it closes at 28 (27 leaves the step open:
#: a start state waiting longer than any reachable one), on the whole controller, with no
#: invariant: 28 cycles cover the worst reachable wait (16 to 18) and let every block's state
#: be a function of the inputs.
CYCLE_INDUCTION = 28


def test_eligible_head_issues_within_the_cycle_bound_for_all_time(tmp_path):
    config = _cycle_config()
    proof = StarvationProof(config, CYCLE_PORTS)
    assert proof.limit == starvation_bound_cycles(config, CYCLE_PORTS)
    result = prove(proof, tmp_path, mode="prove", depth=CYCLE_INDUCTION, timeout=600)
    assert result.passed, explain(result)


def test_cycle_bound_is_tight_within_its_slack(tmp_path):
    config = _cycle_config()
    assert WORST_WAIT_FOUND < starvation_bound_cycles(config, CYCLE_PORTS)
    short = prove(StarvationProof(config, CYCLE_PORTS, WORST_WAIT_FOUND), tmp_path,
                  depth=CYCLE_DEPTH, timeout=600)
    assert short.status == "FAIL", explain(short)
    assert short.vcd is not None and short.vcd.exists()


class _PortZeroFirst(RoundRobin):
    """Mutant: an arbiter that never grants the highest port while port 0 is eligible."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.requests[0]):
            m.d.comb += self.grant.eq(0)
        return m


def test_mutant_arbiter_starving_the_last_port_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "RoundRobin", _PortZeroFirst)
    result = prove(StarvationProof(_cycle_config(), CYCLE_PORTS), tmp_path, depth=CYCLE_DEPTH,
                   timeout=600)
    assert result.status == "FAIL", explain(result)
    assert any("starvation.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


#: BMC depth of the frontend proofs: chunks enter the window one a cycle, and a younger chunk
#: passes the oldest one cap times by step 5 at cap 2 (the tightness runs fail there); 12
#: cycles leave room for several oldest chunks in turn. Each further cycle about doubles the
#: solver's time (20: about 3 minutes at cap 2).
REORDER_DEPTH = 12


@pytest.mark.parametrize("cap", [1, 2])
def test_oldest_chunk_is_passed_at_most_cap_times(tmp_path, cap):
    proof = ReorderCapProof(_fr_config().replace(scheduler_starvation_cap=cap))
    assert proof.limit == cap
    result = prove(proof, tmp_path, depth=REORDER_DEPTH, timeout=300, script=MEMORY_AS_FLOPS)
    assert result.passed, explain(result)


@pytest.mark.parametrize("cap", [1, 2])
def test_reorder_cap_is_tight(tmp_path, cap):
    config = _fr_config().replace(scheduler_starvation_cap=cap)
    result = prove(ReorderCapProof(config, limit=cap - 1), tmp_path, depth=REORDER_DEPTH,
                   timeout=300, script=MEMORY_AS_FLOPS)
    assert result.status == "FAIL", explain(result)
    assert any("reorder.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


def test_mutant_reorder_frontend_ignoring_its_cap_is_caught(tmp_path):
    config = _fr_config()
    # The mutation: the frontend counts to a cap no window reaches within the depth.
    ignoring = config.replace(scheduler_starvation_cap=REORDER_DEPTH + 3)
    result = prove(ReorderCapProof(config, frontend_config=ignoring), tmp_path,
                   depth=REORDER_DEPTH, timeout=300, script=MEMORY_AS_FLOPS)
    assert result.status == "FAIL", explain(result)
    assert any("reorder.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


#: Induction length of the gap lemma: its bound (15) plus one, the least that can close it
#: (the gap counter itself is free at the start of the step); with both ports' frontend
#: invariants assumed (proved above) it closes there.
GAP_INDUCTION = 16


def test_fr_fcfs_some_port_issues_within_the_gap_bound_for_all_time(tmp_path):
    # the longest proof of the tier (minutes): early in the file, so that it starts early
    config = _fr_config()
    proof = StarvationProof(config, CYCLE_PORTS, any_port=True, frontend_invariants=True)
    assert proof.limit == gap_cycles(config) == GAP_INDUCTION - 1
    result = prove(proof, tmp_path, mode="prove", depth=GAP_INDUCTION, timeout=900,
                   script=MEMORY_AS_FLOPS)
    assert result.passed, explain(result)


def test_oldest_chunk_cap_holds_for_all_time_given_the_frontend_invariants(tmp_path):
    # k-induction at k = 1 with the frontend's state invariants assumed (formal/reorder_state.py):
    # the cap lemma follows from them in one step; the invariants' own induction is below.
    result = prove(ReorderCapProof(_fr_config(), invariants="assume"), tmp_path, mode="prove",
                   depth=1, timeout=300)
    assert result.passed, explain(result)


#: BMC depth of the reorder buffer's invariants from reset (the base case of their induction,
#: and more): 8 cycles reach reads issued out of order and their beats landing and handed over
#: (the mutant below fails at step 4).
REORDER_INVARIANT_DEPTH = 8

#: The invariants the mutant's share of the step asserts: the queue of issued reads' head.
HEAD_SHARE = "the head's beats arrived are not beat_in"


def _head_share():
    names = invariant_names(_fr_config(), READ_PARTS)
    k = names.index(HEAD_SHARE)
    return slice(k, k + 1)


def _shares(parts, skip=()):
    """``step_shares`` of ``parts`` at the fr_fcfs config as pytest parameters (id: the first
    invariant's index and name), but the shares of the parts in ``skip``."""
    config = _fr_config()
    skipped = len(invariant_names(config, skip)) if skip else 0
    return [pytest.param(share, id=f"{share.start}-{re.sub(r'[^a-z0-9]+', '_', name)[:40]}")
            for share, name in step_shares(config, parts) if share.start >= skipped]


#: The induction step of the window's and the reorder buffer's invariants in shares (each
#: asserts some invariants in a cycle after one where all held: together, the whole step).
READ_SHARES = _shares(READ_PARTS)

#: The write buffer's shares of the step of the window's and the write buffer's invariants
#: (the window's shares are among READ_SHARES: the union of the two sets is inductive, since
#: each set's step assumes only its own invariants).
WRITE_SHARES = _shares(WRITE_PARTS, skip=("window",))


def test_reorder_buffer_invariants_hold_from_reset(tmp_path):
    # the base case of the induction below, and 7 cycles more
    proof = ReorderInvariantProof(_fr_config(), parts=READ_PARTS)
    result = prove(proof, tmp_path, depth=REORDER_INVARIANT_DEPTH, timeout=300)
    assert result.passed, explain(result)


def test_write_buffer_invariants_hold_at_reset(tmp_path):
    # the base case of the write buffer's induction (BMC 8 with the write buffer's and the
    # reorder buffer's invariants together takes minutes)
    proof = ReorderInvariantProof(_fr_config(), parts=WRITE_PARTS)
    result = prove(proof, tmp_path, depth=1, timeout=300, engine=BOOLECTOR)
    assert result.passed, explain(result)


@pytest.mark.parametrize("share", READ_SHARES)
def test_reorder_buffer_invariant_step_share_closes(tmp_path, share):
    # k-induction at k = 1, one share of the step, from all invariants a cycle before
    proof = ReorderInvariantProof(_fr_config(), READ_PARTS, step=share)
    result = prove(proof, tmp_path, mode="prove", depth=1, timeout=300, engine=BOOLECTOR)
    assert result.passed, explain(result)


@pytest.mark.parametrize("share", WRITE_SHARES)
def test_write_buffer_invariant_step_share_closes(tmp_path, share):
    proof = ReorderInvariantProof(_fr_config(), WRITE_PARTS, step=share)
    result = prove(proof, tmp_path, mode="prove", depth=1, timeout=300, engine=BOOLECTOR)
    assert result.passed, explain(result)


def test_step_shares_cover_every_invariant():
    # every invariant is asserted by one share: the shares' steps are the whole step
    config = _fr_config()
    for parts, shares, skip in ((READ_PARTS, READ_SHARES, ()),
                                (WRITE_PARTS, WRITE_SHARES, ("window",))):
        covered = [k for p in shares for k in range(p.values[0].start, p.values[0].stop)]
        first = len(invariant_names(config, skip)) if skip else 0
        assert covered == list(range(first, len(invariant_names(config, parts))))


def test_mutant_inflight_queue_losing_a_pop_breaks_the_step(tmp_path, monkeypatch):
    """The same share of the step on the queue below that loses a pop: not inductive."""
    issue_order = reorder_rtl.issue_order

    def losing(m, fe, slot, push, pop, depth):
        return issue_order(m, fe, slot, push, pop & ~push, depth)

    share = _head_share()
    monkeypatch.setattr(reorder_rtl, "issue_order", losing)
    proof = ReorderInvariantProof(_fr_config(), READ_PARTS, step=share)
    result = prove(proof, tmp_path, mode="prove", depth=1, timeout=300, engine=BOOLECTOR)
    assert result.status in ("FAIL", "UNKNOWN"), explain(result)
    # the share's assertion (``ReorderInvariantProof``, formal/reorder.py) breaks
    assert any("formal/reorder.py" in f for f in result.failures), result.failures


def test_mutant_inflight_queue_losing_a_pop_is_caught(tmp_path, monkeypatch):
    """A queue of issued reads that loses a pop coming with a push: the cap proof with the
    invariants assumed still passes on it (the assumption prunes every trace that shows the
    fault), so the invariants' own proof is what catches it."""
    issue_order = reorder_rtl.issue_order

    def losing(m, fe, slot, push, pop, depth):
        return issue_order(m, fe, slot, push, pop & ~push, depth)

    monkeypatch.setattr(reorder_rtl, "issue_order", losing)
    proof = ReorderInvariantProof(_fr_config(), parts=READ_PARTS)
    result = prove(proof, tmp_path, depth=REORDER_INVARIANT_DEPTH, timeout=300)
    assert result.status == "FAIL", explain(result)
    assert any("reorder_state.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


def test_fr_fcfs_arbiter_passes_an_eligible_port_at_most_the_bound(tmp_path):
    config = _fr_config()
    proof = ArbiterProof(config, CYCLE_PORTS)
    assert proof.limit == passes_allowed(config, CYCLE_PORTS)
    # k-induction (its invariants make one step inductive): the bound for all time
    result = prove(proof, tmp_path, mode="prove", depth=1, timeout=240)
    assert result.passed, explain(result)


def test_fr_fcfs_chunk_bound_composes_the_proved_bounds():
    # The three fr_fcfs proofs above run at this config; the formula combines their bounds
    # (the figures docs/verification.md states).
    config = _fr_config()
    issues = (config.scheduler_starvation_cap + 1) * (passes_allowed(config, CYCLE_PORTS) + 1)
    assert (issues, gap_cycles(config), chunk_bound_cycles(config, CYCLE_PORTS)) == (4, 15, 63)
    assert chunk_bound_cycles(_cycle_config(), CYCLE_PORTS) == starvation_bound_cycles(
        _cycle_config(), CYCLE_PORTS)
