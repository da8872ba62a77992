"""The views the scheduler has of a port and of a bank, declared once for both sides."""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..arch import ArchConfig
from .port import addr_bits

__all__ = ["HeadSignature", "BankStateSignature", "chunk_addr_bits", "row_bits",
           "check_config_and_ports"]


def check_config_and_ports(config: object, ports: object) -> None:
    """The checks of the blocks that see every port: an ArchConfig and a positive port count."""
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    if isinstance(ports, bool) or not isinstance(ports, int):
        raise TypeError(f"Port count must be an integer, not {ports!r}")
    if ports <= 0:
        raise ValueError(f"Port count must be a positive integer, not {ports}")


def chunk_addr_bits(config: ArchConfig) -> int:
    """Width of internal addresses: a request address plus a burst never wraps around."""
    return addr_bits(config) + 1


def row_bits(config: ArchConfig) -> int:
    """Bits of a row number inside the simulated window (plus the spare range bit)."""
    return max(1, addr_bits(config) + 1 - config.col_bits - config.bank_bits)


class HeadSignature(wiring.Signature):
    """What the scheduler sees of one port: its head chunk and its look-ahead row.

    The members are outputs of the driving side: :class:`~.requester.PortFrontend`'s ``head``
    port, connected to one of :class:`~.scheduler.Scheduler`'s ``ports``.

    Members
    -------
    head_valid, head_addr, head_len, head_write, head_oow : Out
        The chunk waiting for a column command; ``head_oow`` when it lies outside the window.
    la_valid, la_addr : Out
        The start of the next row this port will touch after the head's row.
    ahead_valid, ahead_addr : Out (only with ``ahead > 0``)
        For preparation of their banks, oldest first (bit / element ``k`` for the ``k``-th):
        the start addresses of the requests queued behind the look-ahead one
        (:class:`~.requester.PortFrontend`), or every chunk of the port's window
        (:class:`~.reorder.ReorderFrontend`).

    Parameters
    ----------
    config : ArchConfig
        Address widths.
    ahead : int
        Queued requests visible beyond the look-ahead (0 for the one-entry queue).
    """

    def __init__(self, config: ArchConfig, ahead: int = 0):
        if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
            raise ValueError(f"Queued requests ahead must be a non-negative integer, "
                             f"not {ahead!r}")
        caw = chunk_addr_bits(config)
        self.ahead = ahead
        members = {
            "head_valid": Out(1),
            "head_addr": Out(caw),
            "head_len": Out(range(config.timing.burst_length + 1)),
            "head_write": Out(1),
            "head_oow": Out(1),
            "la_valid": Out(1),
            "la_addr": Out(caw),
        }
        if ahead:
            members["ahead_valid"] = Out(ahead)
            members["ahead_addr"] = Out(caw).array(ahead)
        super().__init__(members)


class BankStateSignature(wiring.Signature):
    """What the scheduler sees of one bank: its open row and which commands are legal.

    The members are outputs of the driving side: :class:`~.bankmachine.BankMachine`'s ``state``
    port, connected to one of :class:`~.scheduler.Scheduler`'s ``banks``.
    """

    def __init__(self, config: ArchConfig):
        super().__init__({
            "is_open": Out(1),
            "open_row": Out(row_bits(config)),
            "act_ready": Out(1),
            "pre_ready": Out(1),
            "col_ready": Out(1),
        })
