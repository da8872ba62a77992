"""Proof harness of the memory controller: free requesters, the timing rules and stream rules."""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, ResetSignal

from ..arch import ArchConfig, DramTiming
from ..contracts.memctrl import max_burst
from ..memctrl.controller import MemoryController
from ..memctrl.properties import CommandRules
from .primitives import AnySeq, Assert, Assume
from .streams import held_until_ready

__all__ = ["PROOF_CONFIG", "PROOF_TIMING", "ControllerProof", "assume_port_protocol",
           "backend_invariants", "elaborate_controller"]

#: Small timing for proofs, every rule distinct and above one cycle where it may be, so a
#: rule off by one shows within a short trace; tREFI short enough that a refresh falls inside
#: the BMC depth.
PROOF_TIMING = DramTiming(cl=2, trcd=3, trp=2, tras=4, twr=2, trefi=10, trfc=3,
                          burst_length=2, trrd=2, tfaw=5, twtr=1, trtp=2, trtw=1, tccd=1)

#: 2 banks of 2 rows of 4 LW (16 LW in all): every bank state and row conflict in few bits.
PROOF_CONFIG = ArchConfig(dram_bytes_per_group=16 * 8, sim_window_lw=16, banks=2, row_lw=4,
                          timing=PROOF_TIMING)


class ControllerProof(Elaboratable):
    """The controller under proof: every requester input free except the port protocol.

    Assumed: no reset after the start; each port's ``req`` and ``wdata`` keep valid and
    payload until ready, and a request's length is 1 .. ``max_burst``. ``rdata.ready`` and all
    addresses are free (out-of-window addresses included). Asserted: :class:`CommandRules`
    (every timing rule of ``rules``), the stream rule on every ``rdata`` and, as invariants
    for k-induction, that the monitor's row state is each bank machine's and its refresh
    interval and refresh owed are the refresher's (when ``rules`` has the controller's tREFI).

    Parameters
    ----------
    config : ArchConfig
        The controller's config.
    ports : int
        Requester ports.
    rules : ArchConfig or None
        The config the command stream is checked against (default ``config``); a mutant test
        builds the controller from a different one.
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG, ports: int = 1,
                 rules: ArchConfig | None = None):
        self.config = config
        self.ports = ports
        self.rules = config if rules is None else rules

    def elaborate(self, platform):
        m = Module()
        dut, inner = elaborate_controller(m, self.config, self.ports, platform)
        m.submodules.rules = rules = CommandRules(self.rules)
        backend_invariants(m, rules, dut.backend, self.config, self.rules)
        m.d.comb += Assume(~ResetSignal())
        for name in ("cmd_valid", "cmd_kind", "cmd_bank", "cmd_row", "cmd_len"):
            m.d.comb += getattr(rules, name).eq(getattr(dut, name))
        m.d.comb += dut.error_clear.eq(AnySeq(1))
        for i, port in enumerate(dut.ports):
            for s in (port.req, port.wdata):
                m.d.comb += [
                    s.valid.eq(AnySeq(1)),
                    s.payload.eq(AnySeq(len(s.payload.as_value()))),
                ]
            m.d.comb += port.rdata.ready.eq(AnySeq(1))
            assume_port_protocol(m, port, self.config, f"port{i}")
            held_until_ready(m, port.rdata, f"port{i}_rdata", Assert)
        return m


def backend_invariants(m: Module, rules: CommandRules, backend, config: ArchConfig,
                       rules_config: ArchConfig) -> None:
    """Assert what k-induction needs to start from a sane state: the monitor agrees with the
    back end.

    True of every reachable state: the monitor's row state is each bank machine's (open, and
    which row), and, when the rules keep the back end's tREFI, its tREFI interval and refresh
    owed are the refresher's (``interval``, ``want``).

    Parameters
    ----------
    m : Module
        The harness module.
    rules : CommandRules
        The monitor of the command stream.
    backend : CommandBackend
        The back end under proof (its ``bank_machines`` and ``refresher``).
    config, rules_config : ArchConfig
        The back end's config and the rules' (a mutant's may differ).
    """
    for b, bank in enumerate(backend.bank_machines):
        st = bank.state
        m.d.comb += [
            Assert(rules.bank_open[b] == st.is_open, f"monitor and bank {b} disagree on open"),
            Assert(~st.is_open | (rules.bank_row[b] == st.open_row),
                   f"monitor and bank {b} disagree on the row"),
        ]
    if rules_config.timing.trefi != config.timing.trefi:
        return   # a mutant's refresher may keep another interval than the rules
    refresher = backend.refresher
    m.d.comb += [
        Assert(rules.refi_count == refresher.interval,
               "monitor and refresher disagree on the tREFI interval"),
        Assert(rules.refresh_owed == refresher.want,
               "monitor and refresher disagree on the refresh owed"),
    ]


def elaborate_controller(m: Module, config: ArchConfig, ports: int, platform=None,
                         controller_class=MemoryController):
    """Add a :class:`MemoryController` to ``m``, elaborated here rather than by the toolchain.

    A harness that reaches inside the controller (its arbiter's requests, its backing store's
    initial contents) needs the elaborated module first. Amaranth's unused-elaboratable
    warning, meant for forgotten blocks, is silenced for the component: its module is used.

    Parameters
    ----------
    m : Module
        The harness module; the controller becomes its submodule ``dut``.
    config : ArchConfig
        The controller's config.
    ports : int
        Requester ports.
    platform : object or None
        The platform the harness is elaborated for.
    controller_class : type
        :class:`MemoryController` or a subclass (one whose frontends a harness reads).

    Returns
    -------
    tuple
        ``(dut, inner)``: the component (its ports, ``engine``, ``scheduler``) and its
        elaborated :class:`Module` (``inner.submodules``).
    """
    dut = controller_class(config, ports)
    dut._MustUse__silence = True
    inner = dut.elaborate(platform)
    m.submodules.dut = inner
    return dut, inner


def assume_port_protocol(m: Module, port, config: ArchConfig, name: str) -> None:
    """Assume what a requester promises: ``req`` and ``wdata`` held until ready, and a
    request's length 1 .. ``max_burst``.

    Parameters
    ----------
    m : Module
        The harness module.
    port : RequesterSignature interface
        The controller's port (``req``, ``wdata``, ``rdata``).
    config : ArchConfig
        The controller's config (``max_burst``).
    name : str
        Prefix of the registers' names and the assumptions' messages.
    """
    length = port.req.payload.length
    m.d.comb += Assume((length >= 1) & (length <= max_burst(config)))
    held_until_ready(m, port.req, f"{name}_req", Assume)
    held_until_ready(m, port.wdata, f"{name}_wdata", Assume)
