"""Verilog export: named after the component, ports from the signature, metadata, cache."""

import json
import re

import pytest
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.verilog import export_memctrl, export_verilog

TINY = MNCORE2_SIM.replace(
    banks=2, row_lw=16, sim_window_lw=64,
    timing=DramTiming(cl=3, trcd=2, trp=2, tras=5, twr=2, trefi=100, trfc=10, burst_length=8))


def test_export_names_ports_metadata_and_cache(tmp_path):
    v = export_memctrl(TINY, 2, build_dir=tmp_path, name="mc_tiny")
    text = v.read_text()
    assert v.name == "mc_tiny.v"
    assert "module mc_tiny(" in text
    for port in ("ports__1__req__payload", "ports__0__rdata__valid", "cmd_kind", "csr_rdata"):
        assert port in text
    assert "initial #0" in text                      # combinational blocks run at time 0
    meta = json.loads(v.with_suffix(".json").read_text())
    assert meta["ports"] == 2 and meta["config"] == TINY.to_dict()
    mtime = v.stat().st_mtime_ns

    assert export_memctrl(TINY, 2, build_dir=tmp_path, name="mc_tiny") == v
    assert v.stat().st_mtime_ns == mtime             # served from the cache
    assert export_memctrl(TINY, 1, build_dir=tmp_path, name="mc_tiny") != v


def test_export_validation(tmp_path):
    with pytest.raises(ValueError, match=r"^Module name must be a Verilog identifier, not '1x'$"):
        export_verilog(lambda: None, "1x", {}, tmp_path)


def _two_memories():
    """A zero-initialised memory beside one with contents, each with a write and a read port."""
    from amaranth.hdl import Module, unsigned
    from amaranth.lib import wiring
    from amaranth.lib.memory import Memory
    from amaranth.lib.wiring import In, Out

    class Top(wiring.Component):
        addr: In(4)
        data: In(16)
        we: In(1)
        zero_q: Out(16)
        rom_q: Out(16)

        def elaborate(self, platform):
            m = Module()
            m.submodules.zero = zero = Memory(shape=unsigned(16), depth=16, init=[])
            m.submodules.rom = rom = Memory(shape=unsigned(16), depth=16,
                                            init=[0x1234 + i for i in range(16)])
            for mem, q in ((zero, self.zero_q), (rom, self.rom_q)):
                wr, rd = mem.write_port(), mem.read_port()
                m.d.comb += [wr.addr.eq(self.addr), wr.data.eq(self.data),
                             wr.en.eq(self.we), rd.addr.eq(self.addr), q.eq(rd.data)]
            return m
    return Top()


def test_zero_memories_get_a_loop_and_others_keep_their_contents(tmp_path):
    text = export_verilog(_two_memories, "two_mems", {"case": "two"}, tmp_path).read_text()
    decls = re.findall(r"^  reg \[15:0\] (\S+) \[15:0\];$", text, re.MULTILINE)
    assert len(decls) == 2, text
    loops = [d for d in decls if f"initial for ({d}__i = 0; {d}__i <= 15;" in text]
    assert len(loops) == 1                                # the zero memory, as a loop
    assert "16'h1234" in text and "16'h1243" in text      # the other's words, one by one
    assert text.count("initial for") == 1
