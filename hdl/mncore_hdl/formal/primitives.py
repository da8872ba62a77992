"""The formal-only Amaranth values, imported in one place.

Amaranth 0.5 exports ``Assert`` and ``Cover`` from ``amaranth.hdl`` but keeps ``Assume``,
``AnySeq`` and ``AnyConst`` in its AST module (``amaranth.asserts`` re-exports two of them with a
deprecation warning); harnesses take them from here so a future Amaranth moves one import.
"""

from amaranth.hdl import Assert, Cover
from amaranth.hdl._ast import AnyConst, AnySeq, Assume

__all__ = ["AnyConst", "AnySeq", "Assert", "Assume", "Cover"]
