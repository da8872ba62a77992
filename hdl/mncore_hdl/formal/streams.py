"""The ``lib.stream`` rule as a property: valid and payload hold until ready."""

from __future__ import annotations

from amaranth.hdl import Module, Signal

__all__ = ["held_until_ready", "held_until_taken"]


def held_until_ready(m: Module, stream, name: str, prop) -> None:
    """Add ``prop`` (``Assume`` for an input stream, ``Assert`` for an output) of the rule.

    Once ``valid`` is high without ``ready``, the next cycle has ``valid`` high and the same
    ``payload``.

    Parameters
    ----------
    m : Module
        The harness module the registers and the statement go into.
    stream : stream.Interface
        The stream (``valid``, ``ready``, ``payload``).
    name : str
        Prefix of the registers' names and the property's message.
    prop : callable
        ``Assume`` or ``Assert``.
    """
    held_until_taken(m, stream.valid, stream.ready, stream.payload.as_value(), name, prop)


def held_until_taken(m: Module, valid, ready, payload, name: str, prop) -> None:
    """:func:`held_until_ready` of a stream given as its signals: ``valid``, ``ready`` and
    ``payload`` (any value: the fields that must hold, concatenated)."""
    waiting = Signal(name=f"{name}_waiting")
    held = Signal(len(payload), name=f"{name}_held")
    m.d.sync += [waiting.eq(valid & ~ready), held.eq(payload)]
    m.d.comb += prop(~waiting | (valid & (payload == held)),
                     f"{name}: valid and payload hold until ready")
