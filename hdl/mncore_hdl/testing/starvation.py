"""Starvation bounds far past the BMC depth: the memory controller under long random traffic
in Amaranth's simulator, the worst gap and waits found (the logic of
``bench/bench_starvation.py``, which prints it; ``tests/hdl/test_memctrl_starvation_sim.py``
runs a short share).

The fr_fcfs chunk bound (``formal.starvation.chunk_bound_cycles``) is composed of three
proofs, one of them (the whole controller's gap: while some port is eligible, some port
issues within ``gap_cycles``) a BMC run that covers gaps starting in the first cycles only.
:func:`simulate` drives :class:`~mncore_hdl.memctrl.controller.MemoryController` at
``STARVATION_CONFIG`` with protocol-legal random traffic on every port and measures, on every
cycle:

* the *gap*: cycles in a row with some port's request to the arbiter up (its
  ``head_eligible``) and no issue (``scheduler.issue``), against ``gap_cycles``;
* each chunk's *wait* with ``fr_fcfs``: cycles in a row with its port's oldest queued chunk
  legal (the frontend's ``oldest_legal``) and not issued (an issue of window entry 0,
  ``selected``), against ``chunk_bound_cycles``; an oldest chunk that loses its legality
  before it issues is counted too (lemma 1 says it never does);
* each port's *head wait*: cycles in a row with the port's request up and no issue of that
  port, against ``starvation_bound_cycles`` (proved for ``in_order``; with ``fr_fcfs`` the
  head it shows may change, and the figure is printed only).

Traffic profiles (:data:`PROFILES`): ``random`` (independent coin flips), ``withhold`` (long
spells without write data or read-data ready), ``reactive`` (each port holds back the write
data of its oldest chunk until the scheduler prepares a younger chunk of that port, then
releases it, and likewise read-data ready: the case a gap may hold two row preparations).
"""

from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any

from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts.memctrl import Cmd, max_burst
from mncore_hdl.formal.memctrl import elaborate_controller
from mncore_hdl.formal.starvation import (
    STARVATION_CONFIG,
    chunk_bound_cycles,
    gap_cycles,
    starvation_bound_cycles,
)

#: fr_fcfs at the config of the three proofs ``chunk_bound_cycles`` composes.
FR_FCFS = STARVATION_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                    scheduler_starvation_cap=1)
IN_ORDER = STARVATION_CONFIG.replace(scheduler="in_order")
PORTS = 2


@dataclasses.dataclass(frozen=True)
class Profile:
    """How the requesters behave: per-cycle probabilities and the withholding policy.

    ``hold`` is the chance per cycle to start a spell without write data (and, separately,
    without read-data ready) of ``spell`` cycles (a range); ``reactive`` holds the write data
    of the oldest write and read-data ready until a younger chunk of the port is prepared.
    """

    name: str
    p_req: float = 0.6
    p_write: float = 0.5
    p_wdata: float = 0.7
    p_ready: float = 0.7
    p_oow: float = 0.02
    hold: float = 0.0
    spell: tuple[int, int] = (4, 40)
    reactive: bool = False
    directed: bool = False


PROFILES = {p.name: p for p in (
    Profile("random"),
    Profile("eager", p_req=0.95, p_wdata=0.95, p_ready=0.95, p_oow=0.0),
    Profile("withhold", hold=0.05, spell=(4, 60)),
    Profile("reactive", p_req=0.8, p_wdata=0.9, p_ready=0.9, p_oow=0.0, reactive=True),
    Profile("sparse", p_req=0.3, p_wdata=0.9, p_ready=0.9, p_oow=0.0, spell=(2, 20),
            reactive=True),
    Profile("directed", directed=True),
)}


class Harness(Elaboratable):
    """The controller, elaborated in place so the bench reaches the arbiter and frontends."""

    def __init__(self, config: ArchConfig, ports: int):
        self.config = config
        self.ports = ports
        self.dut: Any = None
        self.inner: Any = None

    def elaborate(self, platform):
        m = Module()
        self.dut, self.inner = elaborate_controller(m, self.config, self.ports, platform)
        return m


class Requester:
    """One port's random, protocol-legal requester: ``req`` and ``wdata`` held until ready,
    write beats in request order (offered from the cycle their request is offered)."""

    def __init__(self, config: ArchConfig, profile: Profile, rng: random.Random):
        self.config = config
        self.profile = profile
        self.rng = rng
        row = config.row_lw
        # a few rows of each bank: every request a hit or a conflict with its neighbours'
        self.hot = [b * row + r * row * config.banks for b in range(config.banks)
                    for r in range(min(2, config.sim_window_lw // (row * config.banks)))]
        self.req: Any = None     # (addr, length, write) offered, held until accepted
        self.owed = 0            # write beats offered in requests and not yet sent
        self.wbeat: Any = None   # (data, strb) offered, held until accepted
        self.dry = 0             # cycles left without write data
        self.parched = 0         # cycles left without read-data ready
        self.armed = False       # reactive: holding, waiting for a younger preparation

    def _new_request(self):
        c, rng = self.config, self.rng
        if rng.random() < self.profile.p_oow:
            addr = c.sim_window_lw + rng.randrange(c.sim_window_lw)
        else:
            addr = rng.choice(self.hot) + rng.randrange(c.row_lw)
        return addr, rng.randint(1, max_burst(c)), rng.random() < self.profile.p_write

    def drive(self, ctx, port, prepared_younger: bool):
        """Set this cycle's inputs; ``prepared_younger``: the scheduler issued an ACT or PRE
        for a chunk of this port younger than its oldest one last cycle."""
        p, rng = self.profile, self.rng
        if self.req is None and rng.random() < p.p_req:
            self.req = self._new_request()
            self.owed += self.req[1] if self.req[2] else 0
        if self.req is not None:
            a, n, w = self.req
            ctx.set(port.req.payload, {"addr": a, "length": n, "write": w})
        ctx.set(port.req.valid, self.req is not None)
        if p.hold and rng.random() < p.hold:
            self.dry = max(self.dry, rng.randint(*p.spell))
        if p.hold and rng.random() < p.hold:
            self.parched = max(self.parched, rng.randint(*p.spell))
        if p.reactive:
            if not self.armed and self.dry == 0 and rng.random() < 0.05:
                self.armed, self.dry = True, rng.randint(*p.spell)
            elif self.armed and prepared_younger and rng.random() < 0.7:
                self.armed, self.dry = False, 0
            if self.armed:
                self.parched = max(self.parched, 1)
        dry = self.dry > 0 or self.armed
        self.dry = max(0, self.dry - 1)
        if self.dry == 0 and self.armed:
            self.armed = False   # spell over without a preparation: give up this time
        if self.wbeat is None and self.owed and not dry and rng.random() < p.p_wdata:
            self.wbeat = (rng.getrandbits(64), rng.getrandbits(8) | 1)
        if self.wbeat is not None:
            ctx.set(port.wdata.payload, {"data": self.wbeat[0], "strb": self.wbeat[1]})
        ctx.set(port.wdata.valid, self.wbeat is not None)
        ctx.set(port.rdata.ready, self.parched == 0 and rng.random() < p.p_ready)
        self.parched = max(0, self.parched - 1)

    def settle(self, ctx, port):
        """After the cycle's outputs settle: drop what the controller accepted."""
        if self.req is not None and ctx.get(port.req.ready):
            self.req = None
        if self.wbeat is not None and ctx.get(port.wdata.ready):
            self.wbeat = None
            self.owed -= 1


class Quiet:
    """A port that never requests (so another port's gap is its own)."""

    def drive(self, ctx, port, prepared_younger):
        for s in (port.req.valid, port.wdata.valid):
            ctx.set(s, 0)
        ctx.set(port.rdata.ready, 1)

    def settle(self, ctx, port):
        pass


class Directed:
    """Port 0's adversary: the case a gap may hold two row preparations, at every refresh
    phase and release delay.

    Each scenario, from an idle controller at cycle ``phase`` of the tREFI interval: a write
    to bank 0 row 0 (its data sent, so the bank waits for write recovery), a younger write
    ``W`` to the same row with its data withheld, optionally a read that passes ``W`` (of
    bank 1, or a row hit of bank 0; the frontend's cap is then reached, so ``W`` is shown as
    soon as it is legal, ready chunk or not), and a read of bank 0 row 1 (a conflict). ``W``'s
    data is released ``delay`` cycles after the port's last issue before that read, so for
    some delay ``W`` becomes legal while the read's row is being opened: ``W`` is shown instead
    and needs row 0 back. Every (phase, delay, passing read) combination runs once, then the
    driver idles. For ``fr_fcfs`` only: in order nothing passes ``W``, and the driver would
    wait for ever.
    """

    def __init__(self, config: ArchConfig, dut, delays=range(8)):
        self.config = config
        self.dut = dut
        self.cases = [(ph, d, ry) for ry in (1, 0, None) for d in delays
                      for ph in range(config.timing.trefi)]
        self.cycle = 0
        self.reqs: list[Any] = []
        self.free = 0          # write beats that may be sent
        self.sent = 0
        self.beats = 0         # write beats of the scenario
        self.issued = 0
        self.release = None
        self.case = None
        self.offered = False
        self.chunks = 0

    def _addr(self, bank, row, col=0):
        c = self.config
        return (row << (c.col_bits + c.bank_bits)) | (bank << c.col_bits) | col

    def _start(self):
        ph, d, ry = self.case = self.cases.pop(0)
        a = self._addr
        self.reqs = [(a(0, 0, 0), 1, 1), (a(0, 0, 2), 2, 1)]
        self.reqs += [] if ry is None else [(a(ry, 0, 0), 1, 0)]
        self.reqs += [(a(0, 1, 0), 1, 0)]
        self.beats, self.free, self.sent, self.issued = 3, 1, 0, 0
        self.chunks = len(self.reqs)   # one chunk each (none crosses a burst block)
        self.release = None

    def drive(self, ctx, port, prepared_younger):
        if self.case is None and self.cases and ctx.get(self.dut.idle) \
                and self.cycle % self.config.timing.trefi == self.cases[0][0]:
            self._start()
        if self.release is not None and self.cycle >= self.release:
            self.free = self.beats
        if self.reqs:
            a, n, w = self.reqs[0]
            ctx.set(port.req.payload, {"addr": a, "length": n, "write": w})
        ctx.set(port.req.valid, bool(self.reqs))
        self.offered = self.sent < self.free
        ctx.set(port.wdata.payload, {"data": self.sent, "strb": 0xFF})
        ctx.set(port.wdata.valid, self.offered)
        ctx.set(port.rdata.ready, 1)

    def settle(self, ctx, port):
        if self.reqs and ctx.get(port.req.ready):
            self.reqs.pop(0)
        if self.offered and ctx.get(port.wdata.ready):
            self.sent += 1
        sched = self.dut.scheduler
        if self.case is not None and ctx.get(sched.issue) and ctx.get(sched.issue_port) == 0:
            self.issued += 1
            if self.issued == 1 + (self.case[2] is not None):   # the write, the read
                self.release = self.cycle + self.case[1]
            if self.issued == self.chunks:
                self.case = None
        self.cycle += 1


@dataclasses.dataclass
class Worst:
    """The longest run of a condition seen, where it ended, and the cycles around it."""

    cycles: int = 0
    end: int = -1
    trace: list = dataclasses.field(default_factory=list)


class Run:
    """A run of one condition, cycle by cycle, keeping the worst."""

    def __init__(self):
        self.length = 0
        self.worst = Worst()
        self.marked = False          # something happened during this run
        self.worst_marked = Worst()  # the longest run with the mark

    def step(self, cond: bool, cyc: int, history, mark: bool = False) -> None:
        if cond:
            self.length += 1
            self.marked |= mark
            return
        trace = list(history)[-(self.length + 3):]
        if self.length > self.worst.cycles:
            self.worst = Worst(self.length, cyc, trace)
        if self.marked and self.length > self.worst_marked.cycles:
            self.worst_marked = Worst(self.length, cyc, trace)
        self.length = 0
        self.marked = False


@dataclasses.dataclass
class Result:
    """One run's figures: worst gap, worst chunk and head waits per port, and checks."""

    config: ArchConfig
    seed: int
    cycles: int
    profile: str
    gap: Worst
    switched_gap: Worst   # the longest gap in which a port's shown chunk went back to an older
    chunk_wait: list
    head_wait: list
    issues: int
    refreshes: int
    lost_legality: list   # cycles where an eligible oldest chunk fell back without issuing

    @property
    def worst_chunk(self) -> Worst:
        return max(self.chunk_wait, key=lambda w: w.cycles, default=Worst())

    @property
    def worst_head(self) -> Worst:
        return max(self.head_wait, key=lambda w: w.cycles)


def simulate(config: ArchConfig, ports: int, seed: int, cycles: int,
             profile: Profile) -> Result:
    """Drive ``cycles`` cycles of ``profile`` traffic; measure gaps and waits (see module)."""
    rng = random.Random(seed)
    top = Harness(config, ports)
    sim = Simulator(top)   # elaborates: the frontends' ``oldest_legal`` exist from here
    dut, inner = top.dut, top.inner
    requests = inner.submodules["arbiter"].requests
    sched = dut.scheduler
    fes = [inner.submodules[f"port{i}"] for i in range(ports)]
    fr = config.scheduler == "fr_fcfs"
    reqs: list[Any]
    if profile.directed:
        reqs = [Directed(config, dut)] + [Quiet() for _ in range(ports - 1)]
    else:
        reqs = [Requester(config, profile, rng) for _ in range(ports)]
    gap = Run()
    chunk = [Run() for _ in range(ports)]
    head = [Run() for _ in range(ports)]
    history: collections.deque = collections.deque(maxlen=4 * chunk_bound_cycles(config, ports))
    counts = {"issues": 0, "refreshes": 0}
    lost = []

    async def bench(ctx):
        prepared = [False] * ports
        was_waiting = [False] * ports
        last_sel = [0] * ports
        for cyc in range(cycles):
            for i, port in enumerate(dut.ports):
                reqs[i].drive(ctx, port, prepared[i])
            ctx.set(dut.error_clear, rng.random() < 0.5)
            req = ctx.get(requests)
            issue = ctx.get(sched.issue)
            who = ctx.get(sched.issue_port)
            kind = Cmd(ctx.get(dut.cmd_kind)) if ctx.get(dut.cmd_valid) else Cmd.NONE
            cmd_port = ctx.get(dut.cmd_port)
            row = (ctx.get(dut.cmd_bank), ctx.get(dut.cmd_row))
            sel = [ctx.get(fe.selected) if fr else 0 for fe in fes]
            legal = [ctx.get(fe.oldest_legal) if fr else 0 for fe in fes]
            history.append((cyc, kind.name, cmd_port, row, issue, who, req, sel, legal,
                            ctx.get(dut.refresh_pending)))
            counts["issues"] += issue
            counts["refreshes"] += kind == Cmd.REF
            # an older chunk shown instead of the one before, with no issue of the port between
            back = any(s < last for s, last in zip(sel, last_sel, strict=True))
            gap.step(req != 0 and not issue, cyc, history, mark=back)
            for i in range(ports):
                mine = issue and who == i
                head[i].step(bool(req >> i & 1) and not mine, cyc, history)
                if fr:
                    waiting = legal[i] and not (mine and sel[i] == 0)
                    if was_waiting[i] and not legal[i] and not mine:
                        lost.append((cyc, i))
                    chunk[i].step(waiting, cyc, history)
                    was_waiting[i] = waiting
                last_sel[i] = 0 if mine else sel[i]
                prepared[i] = (kind in (Cmd.ACT, Cmd.PRE) and cmd_port == i and sel[i] != 0
                               and not (issue and who == i))
            for i, port in enumerate(dut.ports):
                reqs[i].settle(ctx, port)
            await ctx.tick()

    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return Result(config, seed, cycles, profile.name, gap.worst, gap.worst_marked,
                  [c.worst for c in chunk] if fr else [], [h.worst for h in head],
                  counts["issues"], counts["refreshes"], lost)


def bounds(config: ArchConfig, ports: int) -> dict:
    """The bounds the measured figures are held to (``head`` with ``in_order`` only)."""
    out = {"head": starvation_bound_cycles(config, ports)}
    if config.scheduler == "fr_fcfs":
        out.update(gap=gap_cycles(config), chunk=chunk_bound_cycles(config, ports))
    return out


def violations(result: Result, ports: int = PORTS) -> list[str]:
    """What in ``result`` breaks a bound (empty when every figure is within its bound)."""
    b = bounds(result.config, ports)
    out = []
    where = f"seed {result.seed}, profile {result.profile}"
    if result.config.scheduler == "in_order" and result.worst_head.cycles > b["head"]:
        out.append(f"{where}: head waited {result.worst_head.cycles} > {b['head']}")
    if "gap" in b and result.gap.cycles > b["gap"]:
        out.append(f"{where}: gap of {result.gap.cycles} > {b['gap']} cycles")
    if "chunk" in b and result.worst_chunk.cycles > b["chunk"]:
        out.append(f"{where}: chunk waited {result.worst_chunk.cycles} > {b['chunk']}")
    if result.lost_legality:
        out.append(f"{where}: eligible oldest chunk lost legality at {result.lost_legality[:5]}")
    return out


def format_trace(worst: Worst) -> str:
    """One line per cycle: the command, the issue, requests, each frontend's choice."""
    lines = ["  cycle cmd  port (bank,row) issue(port) requests selected oldest_legal refresh"]
    for cyc, kind, port, row, issue, who, req, sel, legal, ref in worst.trace:
        iss = f"issue p{who}" if issue else "-"
        lines.append(f"  {cyc:6d} {kind:4s} p{port} {row} {iss:9s} req={req:02b} sel={sel} "
                     f"legal={legal} ref={ref}")
    return "\n".join(lines)
