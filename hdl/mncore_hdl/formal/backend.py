"""Proof harness of the command back end: the timing rules for any frontend, by k-induction."""

from __future__ import annotations

from amaranth.hdl import Array, Elaboratable, Module, ResetSignal

from ..arch import ArchConfig
from ..memctrl.backend import CommandBackend
from ..memctrl.controller import head_ahead
from ..memctrl.properties import CommandRules
from .memctrl import PROOF_CONFIG, backend_invariants
from .primitives import Assert, Assume, free_inputs

__all__ = ["BackendProof", "head_len_legal", "one_burst"]


def one_burst(addr, length, config: ArchConfig):
    """``length`` LWs from ``addr`` are one column burst: 1 .. burst length LWs inside one
    burst-aligned block (so inside one row of one bank)."""
    bl = config.timing.burst_length
    return (length >= 1) & ((addr % bl) + length <= bl)


def head_len_legal(head, config: ArchConfig):
    """A head chunk (:class:`~..memctrl.signatures.HeadSignature`) is one column burst."""
    return one_burst(head.head_addr, head.head_len, config)


class BackendProof(Elaboratable):
    """The :class:`CommandBackend` with the port frontends and the arbiter cut away.

    Every input of the back end is free each cycle: each port's head chunk (valid, address in
    or out of the window, length, direction), look-ahead and queued requests, the arbiter's
    grant and its valid, write data, ``error_clear``. One assumption, the contract the
    frontends and arbiter keep (proved of them on their own, ``formal/frontend.py``): the
    granted port's head is one column burst (:func:`head_len_legal`: 1 .. burst length LWs,
    inside one burst-aligned block).
    Asserted: every rule of :class:`CommandRules`, the invariants of
    :func:`~.memctrl.backend_invariants`, and that a head leaves only the granted port
    (``issue -> grant_valid``, ``issue_port == grant``: the back end's half of the contract,
    what :class:`~.frontend.HeadContractProof` assumes of ``issue``). Since a frontend is one
    of the behaviours a free input allows, what holds here holds of the whole controller with
    any frontend that keeps the contract; and here k-induction closes
    (``docs/verification.md``), where on the whole controller the frontends' queues and FIFOs
    keep it open.

    Parameters
    ----------
    config : ArchConfig
        The back end's config.
    ports : int
        Requester ports.
    rules : ArchConfig or None
        The config the command stream is checked against (default ``config``; a mutant
        differs).
    contract : bool
        Assume the frontends' contract (``False`` shows what breaks without it).

    The back end is built as :class:`~..memctrl.controller.MemoryController` builds it for
    ``config`` (``head_ahead``: with ``fr_fcfs`` each head shows the port's whole window).
    """

    def __init__(self, config: ArchConfig = PROOF_CONFIG, ports: int = 3,
                 rules: ArchConfig | None = None, contract: bool = True):
        self.config = config
        self.ports = ports
        self.rules = config if rules is None else rules
        self.contract = contract

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.dut = be = CommandBackend(cfg, self.ports, head_ahead(cfg, self.ports))
        m.submodules.rules = rules = CommandRules(self.rules)
        m.d.comb += Assume(~ResetSignal())
        free_inputs(m, be)
        if self.contract:
            granted = Array(be.heads)[be.grant]
            m.d.comb += Assume(~be.grant_valid | head_len_legal(granted, cfg))
        # the back end's half of the frontends' contract: it issues only the granted port
        m.d.comb += Assert(~be.issue | (be.grant_valid & (be.issue_port == be.grant)),
                           "issue without a grant")
        for name in ("cmd_valid", "cmd_kind", "cmd_bank", "cmd_row", "cmd_len"):
            m.d.comb += getattr(rules, name).eq(getattr(be, name))
        backend_invariants(m, rules, be, cfg, self.rules)
        return m

