"""The input-descriptor register table that ``Bind`` writes and ``Launch`` reads (pure Python).

One descriptor is one 64-bit register word saying where an input of a compiled function lives
in DRAM: ``valid | group | groups | address | lw_per_group``. A relocation (``Bind``) is exactly
one write of such a word; the runtime keeps the (function, io) -> slot map. Nothing here imports
Amaranth, so the runtime, the cocotb server and the hardware share one encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DESCRIPTOR_SLOTS", "DESCRIPTOR_BITS", "SLOT_BITS", "Descriptor", "encode", "decode",
           "SlotTable"]

#: Descriptor registers in the table.
DESCRIPTOR_SLOTS = 64
SLOT_BITS = (DESCRIPTOR_SLOTS - 1).bit_length()
#: Field widths, least significant first after the valid bit: first Group, Group count, LW
#: address, and length (LWs per Group).
GROUP_BITS = 4
ADDR_BITS = 28
LENGTH_FIELD_BITS = 28
DESCRIPTOR_BITS = 1 + 2 * GROUP_BITS + ADDR_BITS + LENGTH_FIELD_BITS


@dataclass(frozen=True)
class Descriptor:
    """Where one input lives: ``lw_per_group`` LWs at ``address`` in Groups ``group..``."""

    group: int
    groups: int
    address: int
    lw_per_group: int


def _field(name: str, value: int, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise ValueError(f"Descriptor {name} must be an integer in [0, 0x{(1 << bits) - 1:x}], "
                         f"not {value!r}")
    return value


def encode(desc: Descriptor) -> int:
    """The 64-bit register word of ``desc`` (bit 0 is the valid bit)."""
    word = 1
    shift = 1
    for name, bits in (("group", GROUP_BITS), ("groups", GROUP_BITS), ("address", ADDR_BITS),
                       ("lw_per_group", LENGTH_FIELD_BITS)):
        word |= _field(name, getattr(desc, name), bits) << shift
        shift += bits
    return word


def decode(word: int) -> Descriptor | None:
    """The descriptor in register ``word``; None when its valid bit is clear."""
    if not word & 1:
        return None
    values = []
    shift = 1
    for bits in (GROUP_BITS, GROUP_BITS, ADDR_BITS, LENGTH_FIELD_BITS):
        values.append((word >> shift) & ((1 << bits) - 1))
        shift += bits
    return Descriptor(*values)


class SlotTable:
    """The runtime's map of (function, io) to a descriptor slot.

    Parameters
    ----------
    slots : int
        Registers in the hardware table.
    """

    def __init__(self, slots: int = DESCRIPTOR_SLOTS):
        self.slots = slots
        self._slot: dict[tuple[str, str], int] = {}

    def slot(self, function: str, io: str, live: set[tuple[str, str]] | None = None) -> int:
        """The slot of ``function.io``, assigning a free one on first use.

        ``live`` (the keys still bound) lets slots of unloaded functions be reused.
        """
        key = (function, io)
        if key in self._slot:
            return self._slot[key]
        if len(self._slot) >= self.slots and live is not None:
            for stale in [k for k in self._slot if k not in live]:
                del self._slot[stale]
        used = set(self._slot.values())
        free = [s for s in range(self.slots) if s not in used]
        if not free:
            raise RuntimeError(f"All {self.slots} input-descriptor registers are in use; "
                               "unload compiled functions (end their Context) to free some")
        self._slot[key] = free[0]
        return free[0]

    def lookup(self, function: str, io: str) -> int | None:
        """The slot of ``function.io``, or None if it was never bound."""
        return self._slot.get((function, io))
