"""The controller's timing rules for all time: k-induction on the back end, composed.

Three proofs, each closed by k-induction (``docs/verification.md``, "The timing rules for all
time"): the command back end keeps every DRAM timing rule for any frontend that shows the
granted port's head as one column burst (:class:`BackendProof`); each arbiter grants only a
requesting port (:class:`GrantProof`); each port frontend requests only with such a head
(:class:`HeadContractProof`). The mutants break each proof's side once.
"""

import dataclasses

import pytest
from formal_support import explain, require_formal_tools
from mncore_hdl.formal import arbiter as arbiter_proof
from mncore_hdl.formal.arbiter import GrantProof
from mncore_hdl.formal.backend import BackendProof
from mncore_hdl.formal.frontend import HeadContractProof
from mncore_hdl.formal.memctrl import PROOF_CONFIG, PROOF_TIMING
from mncore_hdl.formal.readstream import READ_ORDER_CONFIG
from mncore_hdl.formal.runner import DEFAULT_ENGINE, prove
from mncore_hdl.memctrl.arbiter import RoundRobin

#: Induction lengths that close (k - 1 leaves each open: the back end's at "more than one
#: refresh owed", from a start state owing a refresh longer than any reachable one).
BACKEND_K = 8
GRANT_K = 1
HEAD_K = 2

SCHEDULERS = ("in_order", "fr_fcfs")


def _config(scheduler, base=PROOF_CONFIG):
    return base.replace(scheduler=scheduler, scheduler_window=4, scheduler_starvation_cap=1)


@pytest.fixture(scope="module", autouse=True)
def _need_tools():
    require_formal_tools(DEFAULT_ENGINE)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_backend_keeps_every_timing_rule_for_all_time(scheduler, tmp_path):
    result = prove(BackendProof(_config(scheduler), ports=3), tmp_path, mode="prove",
                   depth=BACKEND_K, timeout=600)
    assert result.passed, explain(result)
    assert result.mode == "prove" and result.depth == BACKEND_K


@pytest.mark.parametrize("base", [PROOF_CONFIG, READ_ORDER_CONFIG], ids=["proof", "read_order"])
def test_backend_induction_closes_at_another_timing(base, tmp_path):
    """Every rule 1 cycle (READ_ORDER_CONFIG) as well as the distinct rules of PROOF_CONFIG."""
    result = prove(BackendProof(_config("in_order", base), ports=2), tmp_path, mode="prove",
                   depth=BACKEND_K, timeout=600)
    assert result.passed, explain(result)


def test_backend_induction_closes_with_more_banks(tmp_path):
    """4 banks (k = 10): a due refresh precharges the open banks one a cycle, so the longest
    wait for its REF, and the induction length, grow with the banks (8 banks: k = 14)."""
    config = PROOF_CONFIG.replace(banks=4, sim_window_lw=32, dram_bytes_per_group=32 * 8)
    result = prove(BackendProof(config, ports=3), tmp_path, mode="prove", depth=10, timeout=600)
    assert result.passed, explain(result)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_arbiter_grants_only_a_requesting_port(scheduler, tmp_path):
    result = prove(GrantProof(_config(scheduler), ports=3), tmp_path, mode="prove",
                   depth=GRANT_K, timeout=300)
    assert result.passed, explain(result)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_frontend_requests_only_with_one_burst(scheduler, tmp_path):
    result = prove(HeadContractProof(_config(scheduler)), tmp_path, mode="prove",
                   depth=HEAD_K, timeout=300)
    assert result.passed, explain(result)


def test_backend_needs_the_frontend_contract(tmp_path):
    """Without the contract (a head crossing a burst block) the prover finds a broken rule:
    the assumption is what the proof rests on, and the frontend proof is what discharges it."""
    result = prove(BackendProof(PROOF_CONFIG, ports=1, contract=False), tmp_path, mode="bmc",
                   depth=8, timeout=300)
    assert result.status == "FAIL", explain(result)
    assert any("memctrl/properties.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


def test_mutant_backend_trrd_one_short_is_caught_by_induction_run(tmp_path):
    short = PROOF_CONFIG.replace(timing=dataclasses.replace(PROOF_TIMING, trrd=1))
    result = prove(BackendProof(short, ports=1, rules=PROOF_CONFIG), tmp_path, mode="prove",
                   depth=BACKEND_K, timeout=300)
    assert result.status == "FAIL", explain(result)
    assert any("memctrl/properties.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


def test_mutant_frontend_with_longer_bursts_is_caught(tmp_path):
    """A frontend cutting bursts of 4 against a contract of 2 (the back end's burst length)."""
    longer = PROOF_CONFIG.replace(timing=dataclasses.replace(PROOF_TIMING, burst_length=4))
    result = prove(HeadContractProof(PROOF_CONFIG, frontend_config=longer), tmp_path,
                   mode="bmc", depth=8, timeout=300)
    assert result.status == "FAIL", explain(result)
    assert any("formal/frontend.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


class _EagerRoundRobin(RoundRobin):
    """A round robin that claims a grant every cycle, requests or not."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.valid.eq(1)
        return m


def test_mutant_arbiter_granting_without_a_request_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(arbiter_proof, "RoundRobin", _EagerRoundRobin)
    result = prove(GrantProof(PROOF_CONFIG, ports=3), tmp_path, mode="prove", depth=GRANT_K,
                   timeout=300)
    assert result.status == "FAIL", explain(result)
    assert any("formal/arbiter.py" in f for f in result.failures), result.failures
