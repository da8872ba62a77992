"""mncore_hdl.tooling.coverage: Verilog lines mapped to Amaranth sources, lcov translated."""

from __future__ import annotations

from pathlib import Path

from mncore_hdl.tooling.coverage import Source, src_map, translate_lcov

ROOT = Path("/repo")
#: A module the way Amaranth's Verilog writes one (trimmed from memctrl/timers.py's counter).
VERILOG = """\
(* src = "/repo/hdl/mncore_hdl/memctrl/timers.py:44" *)
module t(clk, ready, trigger);
  wire \\$1 ;
  reg [3:0] \\$3 ;
  (* src = "/venv/amaranth/hdl/_ir.py:283" *)
  input clk;
  (* src = "/repo/hdl/mncore_hdl/memctrl/timers.py:41" *)
  input trigger;
  (* src = "/repo/hdl/mncore_hdl/memctrl/timers.py:45" *)
  reg [3:0] rule_count = 4'h0;
  assign \\$1  = | (* src = "/repo/hdl/mncore_hdl/memctrl/timers.py:48" *) rule_count;
  (* src = "/repo/hdl/mncore_hdl/memctrl/timers.py:45" *)
  always @(posedge clk)
    rule_count <= \\$3 ;
  always @* begin
    \\$3  = rule_count;
    if (trigger) begin
      \\$3  = 4'ha;
    end else if (\\$1 ) begin
      \\$3  = 4'h0;
    end
  end
endmodule
"""


def _line(text: str) -> int:
    return next(i for i, t in enumerate(VERILOG.splitlines(), 1) if t.strip() == text)


def test_attribute_on_the_lines_above():
    table = src_map(VERILOG, ROOT)
    assert table[_line("input trigger;")] == Source("hdl/mncore_hdl/memctrl/timers.py", 41)
    assert table[_line("always @(posedge clk)")] == Source("hdl/mncore_hdl/memctrl/timers.py", 45)


def test_inline_attribute_names_the_operator():
    table = src_map(VERILOG, ROOT)
    assert table[_line("assign \\$1  = | (* src = \"/repo/hdl/mncore_hdl/memctrl/timers.py:48\" *)"
                       " rule_count;")].line == 48


def test_condition_maps_through_the_signal_it_tests():
    table = src_map(VERILOG, ROOT)
    timers = "hdl/mncore_hdl/memctrl/timers.py"
    assert table[_line("end else if (\\$1 ) begin")] == Source(timers, 48)
    assert table[_line("if (trigger) begin")].line == 41


def test_paths_outside_the_checkout_stay_absolute():
    assert src_map(VERILOG, ROOT)[_line("input clk;")] == Source("/venv/amaranth/hdl/_ir.py", 283)


def test_several_locations_prefer_this_package():
    text = '(* src = "/venv/amaranth/lib/fifo.py:9|/repo/hdl/mncore_hdl/memctrl/port.py:7" *)\n' \
           "module m();\nendmodule\n"
    assert src_map(text, ROOT)[2] == Source("hdl/mncore_hdl/memctrl/port.py", 7)


def test_lines_before_any_source_map_to_nothing():
    assert 1 not in src_map("module m();\n  wire a;\nendmodule\n", ROOT)


def test_translate_lcov_credits_amaranth_lines():
    table = {10: Source("hdl/mncore_hdl/memctrl/timers.py", 45),
             11: Source("hdl/mncore_hdl/memctrl/timers.py", 45),
             12: Source("hdl/mncore_hdl/memctrl/timers.py", 48)}
    info = ("TN:\nSF:/b/t.v\nDA:10,3\nDA:11,2\nDA:12,0\nDA:99,7\nBRDA:10,0,0,1\nend_of_record\n"
            "SF:/other.v\nDA:1,1\nend_of_record\n")
    out = translate_lcov(info, {"/b/t.v": table}).splitlines()
    assert out[:3] == ["SF:/other.v", "DA:1,1", "end_of_record"]
    start = out.index(next(t for t in out if t.endswith("hdl/mncore_hdl/memctrl/timers.py")))
    assert out[start + 1:] == ["DA:45,5", "DA:48,0", "LF:2", "LH:1", "end_of_record"]
