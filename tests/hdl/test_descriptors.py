"""The input descriptors (``mncore_hdl/descriptors.py``): descriptor words and the slot
table of the descriptor registers."""

from __future__ import annotations

import pytest
from mncore_hdl.descriptors import DESCRIPTOR_BITS, Descriptor, SlotTable, decode, encode


def test_descriptor_round_trip():
    desc = Descriptor(group=3, groups=1, address=0x1_2345, lw_per_group=1024)
    word = encode(desc)
    assert word & 1 and word < 1 << DESCRIPTOR_BITS
    assert decode(word) == desc
    assert decode(0) is None


def test_descriptor_field_out_of_range():
    with pytest.raises(ValueError, match=r"address must be an integer in \[0, 0xfffffff\]"):
        encode(Descriptor(0, 1, 1 << 28, 1))


def test_slot_table_reuses_slots_of_unbound_functions():
    table = SlotTable(slots=2)
    assert table.slot("f", "x") == 0 and table.slot("g", "y") == 1 and table.slot("f", "x") == 0
    with pytest.raises(RuntimeError, match="All 2 input-descriptor registers are in use"):
        table.slot("h", "z", live={("f", "x"), ("g", "y")})
    assert table.slot("h", "z", live={("g", "y")}) == 0
    assert table.lookup("f", "x") is None
