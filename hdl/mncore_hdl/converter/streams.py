"""The stream between the converter's gather and write engines: one destination LW a word."""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, stream

from ..arch import ArchConfig
from .walker import ACC_BITS

__all__ = ["gathered_layout", "gathered_signature"]


def gathered_layout(config: ArchConfig) -> data.StructLayout:
    """One gathered LW: its ``data`` and where it goes (``group`` and ``addr``, relative to the
    destination's first Group and address, as the gather walk's accumulators hold them)."""
    return data.StructLayout({"data": unsigned(config.lw_bits), "group": signed(ACC_BITS),
                              "addr": signed(ACC_BITS)})


def gathered_signature(config: ArchConfig) -> stream.Signature:
    """A ``lib.stream`` of :func:`gathered_layout` words (gather engine -> FIFO -> writer).

    A function, not a subclass: ``amaranth.lib.stream.Signature`` is final.
    """
    if not isinstance(config, ArchConfig):
        raise TypeError(f"Config must be an ArchConfig, not {config!r}")
    return stream.Signature(gathered_layout(config))
