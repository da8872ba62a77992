"""The requester port of a Group memory controller (contract between the controller and its users).

A requester (host bridge, compute engine, layout converter) drives three streams:

- ``req``   (requester -> controller): ``addr`` (LW address inside the Group's window), ``write``
  and ``length`` (beats in the burst, 1 .. ``max_burst``). A burst may cross DRAM row
  boundaries; the controller splits it.
- ``wdata`` (requester -> controller): one beat per LW of a write burst, ``data`` with ``strb``
  byte enables (bit ``i`` enables byte ``i``, byte 0 the least significant). Write beats follow
  their request in order; a requester may present them before or after the request is accepted.
- ``rdata`` (controller -> requester): one beat per LW of a read burst, in request order, with
  ``error`` set on beats of a burst that fell outside the window (their data is zero).

Every stream obeys ``amaranth.lib.stream`` rules: a transfer happens on a cycle where both
``valid`` and ``ready`` are high, and ``valid`` never waits for ``ready``.
"""

from __future__ import annotations

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.memctrl import RequestFormat, addr_bits, max_burst, rdata_fields, wdata_fields

__all__ = ["request_layout", "wdata_layout", "rdata_layout", "RequesterSignature", "max_burst",
           "addr_bits"]


def request_layout(config: ArchConfig) -> data.StructLayout:
    """Payload of the ``req`` stream (``contracts.memctrl.RequestFormat`` packs it)."""
    return data.StructLayout(RequestFormat.of(config).fields)


def wdata_layout(config: ArchConfig) -> data.StructLayout:
    """Payload of the ``wdata`` stream."""
    return data.StructLayout(wdata_fields(config))


def rdata_layout(config: ArchConfig) -> data.StructLayout:
    """Payload of the ``rdata`` stream."""
    return data.StructLayout(rdata_fields(config))


class RequesterSignature(wiring.Signature):
    """The port as seen by a requester: it drives ``req`` and ``wdata``, receives ``rdata``.

    The controller side is ``RequesterSignature(config).flip()``.
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        super().__init__({
            "req": Out(stream.Signature(request_layout(config))),
            "wdata": Out(stream.Signature(wdata_layout(config))),
            "rdata": In(stream.Signature(rdata_layout(config))),
        })

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequesterSignature) and other.config == self.config

    def __hash__(self) -> int:
        return hash(self.config)

    def __repr__(self) -> str:
        return f"RequesterSignature({self.config!r})"
