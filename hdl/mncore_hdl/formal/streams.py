"""The ``lib.stream`` rule as a property: valid and payload hold until ready."""

from __future__ import annotations

from amaranth.hdl import Module, Signal

__all__ = ["held_until_ready"]


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
    waiting = Signal(name=f"{name}_waiting")
    payload = Signal.like(stream.payload, name=f"{name}_held")
    m.d.sync += [
        waiting.eq(stream.valid & ~stream.ready),
        payload.eq(stream.payload),
    ]
    m.d.comb += prop(~waiting | (stream.valid & (stream.payload.as_value() == payload.as_value())),
                     f"{name}: valid and payload hold until ready")
