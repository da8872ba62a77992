"""The formal-only Amaranth values, imported in one place.

Amaranth 0.5 exports ``Assert`` and ``Cover`` from ``amaranth.hdl`` but keeps ``Assume``,
``AnySeq`` and ``AnyConst`` in its AST module (``amaranth.asserts`` re-exports two of them with a
deprecation warning); harnesses take them from here so a future Amaranth moves one import.
:func:`free_inputs` is how a harness leaves a block's inputs free.
"""

from amaranth.hdl import Assert, Cover, Value
from amaranth.hdl._ast import AnyConst, AnySeq, Assume
from amaranth.lib import wiring

__all__ = ["AnyConst", "AnySeq", "Assert", "Assume", "Cover", "free_inputs"]


def free_inputs(m, component, skip=()) -> None:
    """Drive every input of ``component`` (each ``In`` member of its signature, arrays and
    streams included) with :class:`AnySeq`, but for the top-level members named in ``skip``.
    """
    for path, member, value in component.signature.flatten(component):
        if member.flow == wiring.In and path[0] not in skip:
            m.d.comb += value.eq(AnySeq(len(Value.cast(value))))
