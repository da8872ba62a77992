"""Fast parts of the co-simulation devices: descriptor words, slots, device options, .gtkw."""

from __future__ import annotations

import pytest
from mlsdk import MNDevice
from mlsdk.device.rtl.waves import vcd_variables, write_gtkw
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM
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


def test_rtl_device_strings_and_options():
    dev = MNDevice("mncore2:rtl?waves=/tmp/w")
    assert dev.backend == "rtl" and dev.options == {"waves": "/tmp/w"}
    assert dev.config == MNCORE2_SIM
    assert MNDevice("mncore2:icarus").config == MNCORE2_SIM
    assert MNDevice("mncore2:auto").config == MNCORE2
    with pytest.raises(ValueError, match=r"Unknown option\(s\) \[.wave.\].*known options"):
        MNDevice("mncore2:rtl?wave=x")
    with pytest.raises(ValueError, match="takes no options"):
        MNDevice("mncore2:auto?waves=x")
    with pytest.raises(ValueError, match="valid device strings are: mncore2:auto"):
        MNDevice("mncore2:rtx?waves=x")


def test_rtl_device_refuses_a_dram_larger_than_the_window():
    from mlsdk.device.rtl.amaranth_sim import AmaranthDevice

    with pytest.raises(ValueError, match="simulate 524288 LW of DRAM per Group"):
        AmaranthDevice(MNCORE2, "mncore2:rtl")


VCD = """$timescale 1ps $end
$scope module cosim_top $end
$var wire 1 ! busy $end
$var wire 32 " busy_cycles $end
$var wire 1 # host__0__req__valid $end
$var wire 28 $ compute__1__req__payload $end
$var wire 1 % desc_we $end
$scope module system $end
$var wire 1 & busy $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0!
"""


def test_gtkw_groups_the_top_ports(tmp_path):
    vcd = tmp_path / "s.vcd"
    vcd.write_text(VCD)
    assert ("cosim_top.system", "busy", 1) in vcd_variables(vcd)
    text = write_gtkw(vcd).read_text()
    for group in ("host ports", "compute ports", "layout converter", "counters",
                  "input descriptors"):
        assert group in text
    assert "cosim_top.compute__1__req__payload[27:0]" in text
    assert "cosim_top.busy" in text and "system.busy" not in text
