"""Formal proofs (SymbiYosys): the memory controller's timing rules and streams, the walker.

Each proof runs on the small configs of :mod:`mncore_hdl.formal` (``PROOF_CONFIG``); the
mutant tests break one rule in the design and expect a counterexample with its VCD.
"""

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from formal_support import explain, require_formal_tools
from mncore_hdl.converter import converter
from mncore_hdl.converter.control import ConverterControl
from mncore_hdl.converter.router import PortRouter
from mncore_hdl.converter.walker import LoopWalker
from mncore_hdl.converter.writer import WriteEngine
from mncore_hdl.formal import converter as converter_proof
from mncore_hdl.formal.arbiter import ArbiterProof, passes_allowed
from mncore_hdl.formal.bank import BankProof
from mncore_hdl.formal.converter import ConverterErrorProof, RouterStreamProof, WriterStreamProof
from mncore_hdl.formal.memctrl import PROOF_CONFIG, PROOF_TIMING, ControllerProof
from mncore_hdl.formal.readstream import MEMORY_AS_FLOPS, READ_ORDER_CONFIG, ReadOrderProof
from mncore_hdl.formal.runner import BOOLECTOR, DEFAULT_ENGINE, prove, submit
from mncore_hdl.formal.walker import WalkerProof
from mncore_hdl.memctrl import controller
from mncore_hdl.memctrl.requester import PortFrontend

#: BMC depth of the controller proofs: the longest rule window of PROOF_TIMING (tFAW 5,
#: tRAS 4) and a refresh (tREFI 10 + tRFC 3) fit inside it with margin.
CONTROLLER_DEPTH = 15


@pytest.fixture(scope="module", autouse=True)
def _need_tools():
    require_formal_tools(DEFAULT_ENGINE, BOOLECTOR)


def _timing_proof(scheduler):
    """The controller's timing-rule proof: its harness and :func:`prove` options."""
    config = PROOF_CONFIG.replace(scheduler=scheduler, scheduler_window=4)
    # Boolector: about 5 times faster than yices here (fr_fcfs: 25 s to 2.5 minutes loaded).
    return ControllerProof(config), {"depth": CONTROLLER_DEPTH, "timeout": 900,
                                     "engine": BOOLECTOR}


def _read_order_proof(scheduler):
    """The read-stream proof: its harness and :func:`prove` options."""
    config = READ_ORDER_CONFIG.replace(scheduler=scheduler, scheduler_window=4)
    return ReadOrderProof(config), {"depth": READ_ORDER_DEPTH, "timeout": 900,
                                    "script": MEMORY_AS_FLOPS, "engine": BOOLECTOR}


#: The slowest proofs, by test name: started on a second core as the module starts (CI runs
#: pytest serially on two cores), while the other tests run; each test waits for its result.
EARLY_PROOFS = {
    "test_controller_keeps_every_timing_rule[fr_fcfs]": lambda: _timing_proof("fr_fcfs"),
    "test_read_beats_in_request_order_exactly_length[fr_fcfs]":
        lambda: _read_order_proof("fr_fcfs"),
}


@pytest.fixture(scope="module", autouse=True)
def _early_proofs(request, tmp_path_factory, _need_tools):
    """The futures of :data:`EARLY_PROOFS` whose tests are selected, by test name.

    Each design is exported here, before any test runs (so no mutant's ``monkeypatch`` reaches
    it); only SymbiYosys runs in the pool's thread.
    """
    selected = {item.name for item in request.session.items
                if item.module is request.module and item.name in EARLY_PROOFS}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-proof") as pool:
        futures = {}
        for name in sorted(selected):
            design, options = EARLY_PROOFS[name]()
            futures[name] = submit(pool, design, tmp_path_factory.mktemp("early"), **options)
        yield futures
        pool.shutdown(wait=True, cancel_futures=True)


def _proved(request, tmp_path, early, make):
    """The result of the test's proof: the early one when started, else run here."""
    future = early.get(request.node.name)
    if future is not None:
        return future.result()
    design, options = make()
    return prove(design, tmp_path, **options)


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_controller_keeps_every_timing_rule(request, tmp_path, _early_proofs, scheduler):
    result = _proved(request, tmp_path, _early_proofs, lambda: _timing_proof(scheduler))
    assert result.passed, explain(result)


def test_mutant_trcd_one_short_is_caught(tmp_path):
    timing = dataclasses.replace(PROOF_TIMING, trcd=PROOF_TIMING.trcd - 1)
    mutant = ControllerProof(PROOF_CONFIG.replace(timing=timing), rules=PROOF_CONFIG)
    result = prove(mutant, tmp_path, depth=CONTROLLER_DEPTH, timeout=240, engine=BOOLECTOR)
    assert result.status == "FAIL", explain(result)
    assert result.vcd is not None and result.vcd.exists()
    assert any("properties.py" in f for f in result.failures), result.failures


#: BMC depth of the arbiter proofs: the bounds are at most 3 issues (one a cycle) at
#: 3 ports and cap 2; 20 cycles let every port wait, starve and be passed many times over.
ARBITER_DEPTH = 20

#: Three ports and a starvation cap of 2: every way of passing a waiting port in few cycles.
STARVATION_PORTS = 3


#: The arbiter proofs' induction length: their invariants (``ArbiterProof._invariant``)
#: make each step inductive by itself.
ARBITER_INDUCTION = 1


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_no_port_is_passed_more_than_the_bound(tmp_path, scheduler):
    config = PROOF_CONFIG.replace(scheduler=scheduler, scheduler_starvation_cap=2)
    proof = ArbiterProof(config, STARVATION_PORTS)
    result = prove(proof, tmp_path, depth=ARBITER_DEPTH, timeout=240)
    assert result.passed, explain(result)


@pytest.mark.parametrize(("cap", "ports"), [(1, 2), (1, 3), (2, 3), (3, 3), (1, 4), (2, 4)])
def test_fr_fcfs_pass_bound_holds_for_all_time(tmp_path, cap, ports):
    """Including caps of ``ports - 2`` or less, where ready-first among the starving ports
    let two of them pass a third for ever (the bug this proof found; now oldest first)."""
    config = PROOF_CONFIG.replace(scheduler="fr_fcfs", scheduler_starvation_cap=cap)
    result = prove(ArbiterProof(config, ports), tmp_path, mode="prove",
                   depth=ARBITER_INDUCTION, timeout=240)
    assert result.passed, explain(result)


@pytest.mark.parametrize("ports", [2, 3, 4])
def test_round_robin_pass_bound_holds_for_all_time(tmp_path, ports):
    result = prove(ArbiterProof(PROOF_CONFIG, ports), tmp_path, mode="prove",
                   depth=ARBITER_INDUCTION, timeout=240)
    assert result.passed, explain(result)


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_starvation_bound_is_tight(tmp_path, scheduler):
    config = PROOF_CONFIG.replace(scheduler=scheduler, scheduler_starvation_cap=2)
    limit = passes_allowed(config, STARVATION_PORTS) - 1
    result = prove(ArbiterProof(config, STARVATION_PORTS, limit), tmp_path,
                   depth=ARBITER_DEPTH, timeout=240)
    assert result.status == "FAIL", explain(result)
    assert result.vcd is not None and result.vcd.exists()


#: BMC depth of the read-stream proof (at READ_ORDER_CONFIG, every rule 1 cycle): the first
#: read beat reaches ``rdata`` in cycle 5, so 10 cycles see the beats of the first requests
#: and a refresh. Each further cycle about doubles the solver's time (10, Boolector: 11 s in
#: order, 1.5 to 2.5 minutes with the fr_fcfs reordering frontend, loaded).
READ_ORDER_DEPTH = 10


@pytest.mark.parametrize("scheduler", ["in_order", "fr_fcfs"])
def test_read_beats_in_request_order_exactly_length(request, tmp_path, _early_proofs, scheduler):
    result = _proved(request, tmp_path, _early_proofs, lambda: _read_order_proof(scheduler))
    assert result.passed, explain(result)


class _DropFirstReadBeat(wiring.Component):
    """Mutant: a :class:`PortFrontend` that loses the first read beat the data engine pushes."""

    def __init__(self, config, depth=1):
        self._port = PortFrontend(config, depth)
        super().__init__(self._port.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.port = port = self._port
        dropped = Signal()
        with m.If(self.rpush):
            m.d.sync += dropped.eq(1)
        outer = self.signature.flatten(self)
        inner = port.signature.flatten(port)
        for (path, member, mine), (_, _, theirs) in zip(outer, inner, strict=True):
            if member.flow == wiring.Out:
                m.d.comb += mine.eq(theirs)
            elif path == ("rpush",):
                # The mutation: the first beat never reaches the read FIFO.
                m.d.comb += theirs.eq(mine & dropped)
            else:
                m.d.comb += theirs.eq(mine)
        return m


def test_mutant_dropped_read_beat_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "PortFrontend", _DropFirstReadBeat)
    result = prove(ReadOrderProof(), tmp_path, depth=READ_ORDER_DEPTH, timeout=400,
                   script=MEMORY_AS_FLOPS, engine=BOOLECTOR)
    assert result.status == "FAIL", explain(result)
    assert any("readstream.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


#: Induction length of the bank machine proof: its longest rule (tRAS 4) plus the burst, past
#: which every TimingCounter has forgotten the state the induction step starts from.
BANK_INDUCTION = 4


def test_bank_rules_hold_for_all_time(tmp_path):
    result = prove(BankProof(), tmp_path, mode="prove", depth=BANK_INDUCTION, timeout=240)
    assert result.passed, explain(result)


def test_mutant_bank_tras_one_short_is_caught_by_induction_run(tmp_path):
    timing = dataclasses.replace(PROOF_TIMING, tras=PROOF_TIMING.tras - 1)
    mutant = BankProof(PROOF_CONFIG.replace(timing=timing), rules=PROOF_CONFIG)
    result = prove(mutant, tmp_path, mode="prove", depth=BANK_INDUCTION, timeout=240)
    assert result.status == "FAIL", explain(result)
    assert any("properties.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


#: BMC depth of the walker proof: the longest walk of its descriptor space (4 x 4 = 16 steps)
#: after the restart cycle, its end, and margin.
WALKER_DEPTH = 20


def test_walker_visits_each_address_once(tmp_path):
    result = prove(WalkerProof(), tmp_path, depth=WALKER_DEPTH, timeout=240)
    assert result.passed, explain(result)


#: Induction length of the walker proof: its invariants are inductive in one step; 3 is margin.
WALKER_INDUCTION = 3


def test_walker_visits_each_address_once_for_all_time(tmp_path):
    result = prove(WalkerProof(), tmp_path, mode="prove", depth=WALKER_INDUCTION, timeout=240)
    assert result.passed, explain(result)


class _OffByOneWalker(wiring.Component):
    """Mutant: a :class:`LoopWalker` whose innermost loop runs one step past its extent."""

    def __init__(self, loops, quantities):
        self._walker = LoopWalker(loops, quantities)
        self.count = self._walker.count
        super().__init__(self._walker.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.walker = w = self._walker
        m.d.comb += [w.n.eq(self.n), w.restart.eq(self.restart), w.advance.eq(self.advance),
                     self.last.eq(w.last)]
        for k in range(w.loops):
            # The mutation: extent + 1 on the innermost loop, its end test off by one.
            m.d.comb += w.extent[k].eq(self.extent[k] + (k == 0))
            for q in range(w.quantities):
                m.d.comb += w.carry[k][q].eq(self.carry[k][q])
        for q in range(w.quantities):
            m.d.comb += self.acc[q].eq(w.acc[q])
        return m


def test_mutant_walker_off_by_one_is_caught(tmp_path):
    result = prove(WalkerProof(_OffByOneWalker), tmp_path, depth=WALKER_DEPTH, timeout=240)
    assert result.status == "FAIL", explain(result)
    assert result.vcd is not None and result.vcd.exists()


#: BMC depth of the converter proof: a start in cycle 0 or 1 is checked (MAX_LOOPS cycles) and
#: rejected by cycle 10.
CONVERTER_DEPTH = 11


def test_converter_rejected_program_touches_no_memory(tmp_path):
    result = prove(ConverterErrorProof(), tmp_path, depth=CONVERTER_DEPTH, timeout=240,
                   engine=BOOLECTOR)
    assert result.passed, explain(result)


class _RunDespiteError(ConverterControl):
    """Mutant: a control that starts the engines on a rejected program too."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.checked & (self.code != 0)):
            m.d.comb += self.run.eq(1)
        return m


def test_mutant_converter_running_a_rejected_program_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(converter, "ConverterControl", _RunDespiteError)
    result = prove(ConverterErrorProof(), tmp_path, depth=CONVERTER_DEPTH, timeout=240,
                   engine=BOOLECTOR)
    assert result.status == "FAIL", explain(result)
    assert result.vcd is not None and result.vcd.exists()


def test_converter_router_keeps_the_stream_rule_for_all_time(tmp_path):
    result = prove(RouterStreamProof(), tmp_path, mode="prove", depth=1, timeout=240)
    assert result.passed, explain(result)


class _WriteFirstRouter(PortRouter):
    """Mutant: the router before the fix, a write for a Group shown at once, replacing the
    read request the port had not taken yet."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        for i, port in enumerate(self.ports):
            wr_here = self.wr_valid[0] & (self.wr_group[0] == i)
            rd_here = self.rd_valid[0][i] & ~wr_here
            m.d.comb += [
                port.req.valid.eq(wr_here | rd_here),
                port.req.p.write.eq(wr_here),
                port.req.p.addr.eq(Mux(wr_here, self.wr_addr[0], self.rd_addr[0][i])),
                port.req.p.length.eq(Mux(wr_here, self.wr_len[0], self.rd_len[0][i])),
                self.rd_ready[0][i].eq(rd_here & port.req.ready),
            ]
        return m


class _SwitchingRouter(PortRouter):
    """Mutant: a round robin that moves to the next engine's read while one engine's read is
    shown and not taken (the port's payload changes before ready)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        for g, port in enumerate(self.ports):
            for e in range(self.engines):
                with m.If(self.rd_valid[e][g] & ~port.req.p.write):
                    m.d.comb += port.req.p.addr.eq(self.rd_addr[e][g])
        return m


def test_mutant_router_switching_engines_on_a_shown_read_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(converter_proof, "PortRouter", _SwitchingRouter)
    result = prove(RouterStreamProof(), tmp_path, mode="bmc", depth=4, timeout=240)
    assert result.status == "FAIL", explain(result)
    assert any("formal/streams.py" in f for f in result.failures), result.failures


def test_mutant_router_replacing_a_shown_read_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(converter_proof, "PortRouter", _WriteFirstRouter)
    result = prove(RouterStreamProof(), tmp_path, mode="bmc", depth=4, timeout=240)
    assert result.status == "FAIL", explain(result)
    assert any("formal/streams.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()


#: BMC depth of the writer proof: a start, requests ahead of their beats (2-LW bursts), their
#: beats written, and the footprint's end.
WRITER_DEPTH = 12


def test_converter_writer_keeps_the_stream_rule(tmp_path):
    result = prove(WriterStreamProof(), tmp_path, depth=WRITER_DEPTH, timeout=240)
    assert result.passed, explain(result)


class _AskWhatIsInWriter(WriteEngine):
    """Mutant: a writer that asks for the beats it holds when fewer than a burst (its request's
    length follows the buffer while the port has not taken it)."""

    def _request_length(self, m, addr, group_left, unclaimed):
        full = super()._request_length(m, addr, group_left, unclaimed)
        length = Signal.like(full)
        m.d.comb += length.eq(Mux((unclaimed > 0) & (unclaimed < full), unclaimed, full))
        return length


def test_mutant_writer_growing_a_shown_request_is_caught(tmp_path):
    result = prove(WriterStreamProof(writer=_AskWhatIsInWriter), tmp_path, depth=WRITER_DEPTH,
                   timeout=240)
    assert result.status == "FAIL", explain(result)
    assert any("formal/streams.py" in f for f in result.failures), result.failures
    assert result.vcd is not None and result.vcd.exists()
