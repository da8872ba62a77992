"""Verilog export: named after the component, ports from the signature, metadata, and a cache
keyed by the sources the design imports."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.tooling.verilog import export_memctrl, export_verilog

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


# -- the cache key follows the design's sources -------------------------------------------------

def test_design_sources_cover_every_module_the_design_loads():
    """Every ``mncore_hdl`` module loaded by building and elaborating the co-simulation top (in
    a fresh interpreter) is among the sources that key its Verilog cache."""
    import mncore_hdl
    from mncore_hdl.tooling.verilog import design_sources
    from mncore_hdl.top.cosim_top import CosimTop

    hdl = Path(mncore_hdl.__file__).resolve().parents[1]
    code = ("import sys\n"
            "from amaranth.hdl import Fragment\n"
            "from mncore_hdl.arch import MNCORE2_SIM\n"
            "from mncore_hdl.top.cosim_top import CosimTop\n"
            "Fragment.get(CosimTop(MNCORE2_SIM.replace(sim_window_lw=1024,"
            " dram_bytes_per_group=8192)), None)\n"
            "print('\\n'.join(m.__file__ for n, m in list(sys.modules.items())"
            " if n.startswith('mncore_hdl') and getattr(m, '__file__', None)))\n")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(hdl), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True,
                         text=True).stdout
    loaded = {Path(line).resolve() for line in out.split()}
    sources = set(design_sources(CosimTop))
    assert loaded and loaded <= sources, sorted(str(p) for p in loaded - sources)
    names = {p.relative_to(hdl / "mncore_hdl").as_posix() for p in sources}
    assert {"converter/regfile.py", "memctrl/controller.py", "contracts/memctrl.py",
            "top/system.py", "top/cosim_top.py", "tooling/verilog.py"} <= names


def test_cache_key_changes_with_any_source_and_the_tools(monkeypatch):
    import importlib.metadata

    from mncore_hdl.memctrl.controller import MemoryController
    from mncore_hdl.tooling import verilog

    base = verilog.design_digest(MemoryController)
    read = verilog.read_source
    for path in verilog.design_sources(MemoryController):
        monkeypatch.setattr(verilog, "read_source",
                            lambda p, path=path: read(p) + (b"\n# edited" if p == path else b""))
        assert verilog.design_digest(MemoryController) != base, path
    monkeypatch.setattr(verilog, "read_source", read)
    version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda tool: "0.0-other" if tool == "amaranth" else version(tool))
    assert verilog.design_digest(MemoryController) != base


# -- one clocked block per module ---------------------------------------------------------------

_TWO_MODULES = """\
module \\top.a (clk, d, q);
  always @(posedge clk)
    r0 <= \\$1 ;
  always @* begin
    \\$1  = d;
  end
  always @(posedge clk) begin
    if (we)
      mem[addr] <= d;
  end
  always @(posedge clk)
    r1 <= \\$2 ;
  always @(posedge fast)
    r2 <= r1;
  always @(posedge clk)
    q <= r0;
endmodule
module \\top.b (clk, q);
  always @(posedge clk)
    q <= \\$3 ;
endmodule
"""


def test_merge_clocked_blocks_keeps_every_assignment_in_one_block_per_clock():
    from mncore_hdl.tooling.verilog import merge_clocked_blocks

    text = merge_clocked_blocks(_TWO_MODULES)
    a, b = text.split("endmodule\n")[:2]
    assert a.count("always @(posedge clk) begin") == 2        # the merged one and the memory's
    assert ("  always @(posedge clk) begin\n    r0 <= \\$1 ;\n    r1 <= \\$2 ;\n    q <= r0;\n"
            "  end\n") in a
    assert "  always @(posedge fast) begin\n    r2 <= r1;\n  end\n" in a
    assert "    if (we)\n      mem[addr] <= d;\n" in a             # multi-line blocks stay
    assert "always @* begin\n    \\$1  = d;\n  end" in a
    assert b == "module \\top.b (clk, q);\n  always @(posedge clk)\n    q <= \\$3 ;\n"  # alone


def test_exported_modules_have_one_block_for_their_flip_flops(tmp_path):
    """Icarus wakes every clocked block at every edge: the export writes one per module."""
    text = export_memctrl(TINY, 2, build_dir=tmp_path, name="mc_merged").read_text()
    modules = text.split("\nendmodule")
    single = re.compile(r"^  always @\(posedge clk\)\n    [^\n;]+ <= [^\n;]+;$", re.MULTILINE)
    merged = [m for m in modules if "always @(posedge clk) begin\n    " in m]
    assert len(merged) > 5
    for module in modules:  # a module's only flip-flop may keep its block; two may not
        if len(single.findall(module)) > 1:
            raise AssertionError(f"flip-flops left in blocks of their own:\n{module[:400]}")
