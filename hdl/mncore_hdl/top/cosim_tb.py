"""The simulation testbench around the co-simulation top: host DMA engines and bulk back door.

``cosim_tb`` (Verilog, generated here from the exported ``cosim_top``) is what the cocotb
simulators run. It passes every port of ``cosim_top`` through under the same name, so the
beat-by-beat driver and the waveform groups see the same signals, and adds two testbench-side
parts that keep Python off the per-cycle path:

- **one host DMA engine per Group** (``cosim_tb_dma``), fed from a staging memory as large as
  the Group's DRAM window. It drives the ``host`` or ``compute`` port exactly as the driver's
  beat-by-beat loop does: requests of at most one DRAM row, write beats as soon as the port
  takes them, every Group in parallel, read data accepted while any Group is still busy. So a
  host write or read is one round trip with the same cycles as the beat path
  (``sim/test_cosim_dma.py`` compares them).
- **bulk back door**: a toggle of ``mem_go`` loads or dumps a range of any backing store or
  staging memory through one file, with no clock edge (raw words on Verilator, hex lines on
  Icarus: ``mem_binary``); ``mem_ack`` toggles when it is done.

Control ports (all set by the driver, see ``docs/cosim.md``):

========================  =============================================================
``dma_go``                held high for the whole transfer; low resets the engines
``dma_write``             1: staging memory -> DRAM; 0: DRAM -> staging memory
``dma_path``              0: the ``host`` ports, 1: the ``compute`` ports
``dma_groups``            bit ``g``: Group ``g`` takes part
``dma_addr``/``dma_len``  LW address in each Group and LWs per Group (staging index 0..len-1)
``dma_done``              rises at the clock edge of the transfer's last beat
``dma_cycles``            edges from the first request to ``dma_done`` (latched at done)
``dma_error``             per Group: a read beat carried the out-of-window flag
``mem_sel``               ``g``: Group ``g``'s backing store; ``groups + g``: its staging memory
``mem_lo``/``mem_hi``     first and last word of the range
``mem_dir``               0: load from the file, 1: dump into it
``mem_go``/``mem_ack``    toggle to start; toggles back when done
``mem_binary``            1: the file holds raw 64-bit words (Verilator; loads big-endian,
                          dumps little-endian); 0: one hex word per line (Icarus)
========================  =============================================================
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from ..arch import ArchConfig
from ..contracts.cosim import TB_DUT_INSTANCE, backing_store

__all__ = ["TB_MODULE", "MEMFILE_DEFAULT", "RESET_EDGES", "STROBE_BITS", "TbPort", "top_ports",
           "cosim_tb_verilog", "write_cosim_tb", "export_cosim_tb", "public_signals"]

#: Module name of the testbench top.
TB_MODULE = "cosim_tb"
#: Name of the file plusarg that names the back-door file.
MEMFILE_PLUSARG = "mncore_memfile"
#: The back-door file, relative to the simulator's working folder, unless the plusarg names one.
MEMFILE_DEFAULT = "cosim_mem.dat"
_PORT = re.compile(r"^  (input|output) (?:\[(\d+):0\] )?(\w+);$", re.MULTILINE)


class TbPort:
    """One port of the wrapped top: direction, name, width."""

    def __init__(self, direction: str, name: str, width: int):
        self.direction = direction
        self.name = name
        self.width = width

    def signal(self) -> str:
        """Declaration inside ``cosim_tb``: a driven input becomes a register set by VPI."""
        rng = f"[{self.width - 1}:0] " if self.width > 1 else ""
        if self.direction == "input":
            return f"  reg {rng}{self.name} = 0;"
        return f"  wire {rng}{self.name};"


def top_ports(verilog_text: str, module: str = "cosim_top") -> list[TbPort]:
    """The ports of ``module`` as declared in yosys-written Verilog."""
    verilog_text = "\n" + verilog_text
    start = verilog_text.find(f"\nmodule {module}(")
    if start < 0:
        raise ValueError(f"module {module!r} not found in the Verilog")
    end = verilog_text.find("\nendmodule", start)
    body = verilog_text[start:end]
    ports = [TbPort(d, n, int(hi) + 1 if hi else 1) for d, hi, n in _PORT.findall(body)]
    if not ports:
        raise ValueError(f"module {module!r} declares no ports")
    return ports


#: Inputs of ``cosim_tb`` beside the design's.
_CONTROL_IN = ("dma_go", "dma_write", "dma_path", "dma_groups", "dma_addr", "dma_len",
               "mem_sel", "mem_lo", "mem_hi", "mem_dir", "mem_go")
#: Rising edges the testbench holds the design in reset for.
RESET_EDGES = 3
#: Outputs of ``cosim_tb`` it holds in registers.
_LATCHED = ("dma_done", "dma_cycles", "dma_error", "mem_ack")
#: Constant outputs of ``cosim_tb`` (read-only through VPI).
_CONSTANT = ("mem_binary",)
#: Bits of the write strobe above the 64-bit data word in a ``wdata`` payload.
STROBE_BITS = 8

_DMA = """\
// One Group's host DMA engine: the driver's beat-by-beat transfer loop in hardware.
module cosim_tb_dma(clk, go, write, en, addr, len, req_ready, wdata_ready, rdata_valid,
                    rdata_payload, req_valid, req_payload, wdata_valid, wdata_payload,
                    busy, busy_next, err_next);
  parameter AW = 20;        // address bits of a request (one spare above the window)
  parameter LENW = 9;       // burst-length field width
  parameter ROWW = 8;       // log2(LWs per DRAM row): the longest burst is one row
  parameter DEPTH = 1024;   // staging memory words
  input clk, go, write, en;
  input [AW-1:0] addr, len;
  input req_ready, wdata_ready, rdata_valid;
  input [64:0] rdata_payload;
  output req_valid, wdata_valid, busy, busy_next, err_next;
  output [AW+LENW:0] req_payload;
  output [71:0] wdata_payload;
  reg [63:0] stage [0:DEPTH-1];
  reg [AW-1:0] a_off = 0, beat = 0;
  reg err = 0;
  wire [AW-1:0] cur = addr + a_off;
  wire [AW-1:0] left = len - a_off;
  wire [AW-1:0] to_row_end = (1 << ROWW) - {{(AW-ROWW){1'b0}}, cur[ROWW-1:0]};
  wire [AW-1:0] n = (to_row_end < left) ? to_row_end : left;
  wire req_pending = en && (a_off < len);
  wire data_pending = en && (beat < len);
  assign busy = req_pending || data_pending;
  assign req_valid = go && req_pending;
  assign req_payload = {n[LENW-1:0], write, cur};
  assign wdata_valid = go && write && data_pending;
  assign wdata_payload = {{8{1'b1}}, stage[beat]};
  wire req_fire = req_valid && req_ready;
  wire data_fire = write ? (wdata_valid && wdata_ready) : (go && rdata_valid && data_pending);
  wire [AW-1:0] a_off_next = a_off + (req_fire ? n : 0);
  wire [AW-1:0] beat_next = beat + (data_fire ? 1 : 0);
  assign busy_next = en && ((a_off_next < len) || (beat_next < len));
  assign err_next = err || (data_fire && !write && rdata_payload[64]);
  always @(posedge clk) begin
    if (!go) begin
      a_off <= 0;
      beat <= 0;
      err <= 0;
    end else begin
      a_off <= a_off_next;
      beat <= beat_next;
      err <= err_next;
      if (data_fire && !write)
        stage[beat] <= rdata_payload[63:0];
    end
  end
endmodule
"""


def _lane_wiring(g: int, paths: tuple[str, ...]) -> list[str]:
    """Mux the Python-driven port inputs of Group ``g`` with its DMA engine."""
    lines = []
    for p, path in enumerate(paths):
        pre = f"{path}__{g}__"
        use = f"dma_go && dma_groups[{g}] && dma_path == {p}"
        lines += [
            f"  wire {pre}dma = {use};",
            f"  wire {pre}req__valid_m = {pre}dma ? dma{g}_req_valid : {pre}req__valid;",
            f"  wire [{{REQW}}:0] {pre}req__payload_m = {pre}dma ? dma{g}_req_payload"
            f" : {pre}req__payload;",
            f"  wire {pre}wdata__valid_m = {pre}dma ? dma{g}_wdata_valid : {pre}wdata__valid;",
            f"  wire [71:0] {pre}wdata__payload_m = {pre}dma ? dma{g}_wdata_payload"
            f" : {pre}wdata__payload;",
            f"  wire {pre}rdata__ready_m = {pre}dma ? dma_rdata_ready : {pre}rdata__ready;",
        ]
    return lines


def cosim_tb_verilog(top_text: str, config: ArchConfig) -> str:
    """Verilog of ``cosim_tb`` (the testbench top and its DMA engine) for ``cosim_top``."""
    from ..memctrl.port import addr_bits, max_burst

    ports = top_ports(top_text)
    by_name = {p.name: p for p in ports}
    groups = config.groups
    paths = ("host", "compute")
    aw = addr_bits(config)
    req_w = by_name["host__0__req__payload"].width
    lenw = req_w - aw - 1
    row = max_burst(config)
    roww = row.bit_length() - 1
    if (1 << roww) != row or by_name["host__0__wdata__payload"].width != 64 + STROBE_BITS:
        raise ValueError(f"cosim_tb expects a power-of-two row and 72-bit wdata, got row={row}")
    muxed = {f"{path}__{g}__{m}" for g in range(groups) for path in paths
             for m in ("req__valid", "req__payload", "wdata__valid", "wdata__payload",
                       "rdata__ready")}
    control = [
        TbPort("input", "dma_go", 1), TbPort("input", "dma_write", 1),
        TbPort("input", "dma_path", 1), TbPort("input", "dma_groups", groups),
        TbPort("input", "dma_addr", aw), TbPort("input", "dma_len", aw),
        TbPort("output", "dma_done", 1), TbPort("output", "dma_cycles", 32),
        TbPort("output", "dma_error", groups),
        TbPort("input", "mem_sel", 8), TbPort("input", "mem_lo", 32),
        TbPort("input", "mem_hi", 32), TbPort("input", "mem_dir", 1),
        TbPort("input", "mem_go", 1), TbPort("output", "mem_ack", 1),
    ]
    # The only port is the clock. Every other input of the design is a register that VPI
    # writes: Verilator re-evaluates logic fed by top-level inputs (its "ico" region) on every
    # evaluation, which for this design (every next-state function depends on ``rst``) cost
    # about 40% of the simulation time when they were ports.
    out = ["// Generated by mncore_hdl.top.cosim_tb from cosim_top; do not edit.",
           f"module {TB_MODULE}(clk);", "  input clk;"]
    out += [p.signal() for p in ports + control
            if p.name not in ("clk", "rst") and p.name not in _LATCHED]
    out += [f"  reg [{p.width - 1}:0] {p.name} = 0;" for p in control if p.name in _LATCHED]
    # Reset is generated here, not written by VPI: every next-state function of the design
    # depends on it, so as a VPI-writable signal it would be re-evaluated on every evaluation.
    # It is high for the first RESET_EDGES rising edges; the server waits for it to fall.
    out += [f"  reg [3:0] reset_left = {RESET_EDGES};",
            "  wire rst = reset_left != 0;",
            "  always @(posedge clk) if (rst) reset_left <= reset_left - 1;"]
    # -- DMA engines -------------------------------------------------------------------------
    out.append(f"  wire [{groups - 1}:0] dma_busy, dma_busy_next, dma_err_next;")
    out.append("  wire dma_rdata_ready = dma_go && !dma_write && (|dma_busy);")
    for g in range(groups):
        sel = " : ".join(f"dma_path == {p} ? {path}__{g}__" + "{}" for p, path in
                         enumerate(paths[:-1])) + f" : {paths[-1]}__{g}__" + "{}"
        def pick(member: str, sel: str = sel) -> str:
            return sel.replace("{}", member)
        out += [
            f"  wire dma{g}_req_valid, dma{g}_wdata_valid;",
            f"  wire [{req_w - 1}:0] dma{g}_req_payload;",
            f"  wire [71:0] dma{g}_wdata_payload;",
            f"  cosim_tb_dma #(.AW({aw}), .LENW({lenw}), .ROWW({roww}), "
            f".DEPTH({config.sim_window_lw})) dma{g} (",
            f"    .clk(clk), .go(dma_go), .write(dma_write), .en(dma_groups[{g}]),",
            "    .addr(dma_addr), .len(dma_len),",
            f"    .req_ready({pick('req__ready')}), .wdata_ready({pick('wdata__ready')}),",
            f"    .rdata_valid({pick('rdata__valid')}), .rdata_payload({pick('rdata__payload')}),",
            f"    .req_valid(dma{g}_req_valid), .req_payload(dma{g}_req_payload),",
            f"    .wdata_valid(dma{g}_wdata_valid), .wdata_payload(dma{g}_wdata_payload),",
            f"    .busy(dma_busy[{g}]), .busy_next(dma_busy_next[{g}]),"
            f" .err_next(dma_err_next[{g}]));",
        ]
        out += [line.replace("{REQW}", str(req_w - 1)) for line in _lane_wiring(g, paths)]
    out += [
        "  reg [31:0] dma_count = 0;",
        "  always @(posedge clk) begin",
        "    if (!dma_go) begin",
        "      dma_done <= 0;",
        "      dma_count <= 0;",
        "    end else if (!dma_done) begin",
        "      dma_count <= dma_count + 1;",
        "      if (!(|dma_busy_next)) begin",
        "        // results before done: a simulator applies one process's updates in order, so",
        "        // whoever wakes on dma_done already reads them",
        "        dma_cycles <= dma_count + 1;",
        "        dma_error <= dma_err_next;",
        "        dma_done <= 1;",
        "      end",
        "    end",
        "  end",
    ]
    # -- bulk back door ----------------------------------------------------------------------
    # Verilator reads and writes the file as raw 64-bit words ($fread: big-endian; %u:
    # little-endian), 5x faster than its $readmemh parser; Icarus keeps hex, which its
    # $readmemh/$writememh handle faster than a word loop. `mem_binary` says which.
    out += [
        "  reg [8*1024-1:0] memfile;",
        f'  initial if (!$value$plusargs("{MEMFILE_PLUSARG}=%s", memfile))'
        f' memfile = "{MEMFILE_DEFAULT}";',
        "`ifdef VERILATOR",
        "  wire mem_binary = 1'b1;",
        "  integer mem_fd, mem_i, mem_n;",
        "`else",
        "  wire mem_binary = 1'b0;",
        "`endif",
        "  always @(posedge mem_go or negedge mem_go) begin",
        "    case (mem_sel)",
    ]
    for g in range(groups):
        for k, mem in ((g, backing_store("cosim_tb", g)), (groups + g, f"dma{g}.stage")):
            out += ["`ifdef VERILATOR",
                    f"      {k}: if (mem_dir) begin",
                    '        mem_fd = $fopen(memfile, "wb");',
                    "        for (mem_i = mem_lo; mem_i <= mem_hi; mem_i = mem_i + 1)",
                    f'          $fwrite(mem_fd, "%u", {mem}[mem_i]);',
                    "        $fclose(mem_fd);",
                    "      end else begin",
                    '        mem_fd = $fopen(memfile, "rb");',
                    f"        mem_n = $fread({mem}, mem_fd, mem_lo, mem_hi - mem_lo + 1);",
                    "        $fclose(mem_fd);",
                    "      end",
                    "`else",
                    f"      {k}: if (mem_dir) $writememh(memfile, {mem}, mem_lo, mem_hi);",
                    f"         else $readmemh(memfile, {mem}, mem_lo, mem_hi);",
                    "`endif"]
    out += ["      default: ;", "    endcase", "    mem_ack <= !mem_ack;", "  end"]
    # -- the design ----------------------------------------------------------------------------
    conns = []
    for p in ports:
        src = f"{p.name}_m" if p.name in muxed else p.name
        conns.append(f"    .{p.name}({src})")
    out += [f"  cosim_top {TB_DUT_INSTANCE} (", ",\n".join(conns), "  );", "endmodule", "", _DMA]
    return "\n".join(out) + "\n"


def write_cosim_tb(top_verilog: Path, config: ArchConfig) -> Path:
    """Write ``cosim_tb.v`` beside ``top_verilog`` (once; the folder is keyed by the design)."""
    path = top_verilog.with_name(f"{TB_MODULE}.v")
    text = cosim_tb_verilog(top_verilog.read_text(), config)
    if not path.exists() or path.read_text() != text:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def public_signals(top_text: str) -> list[tuple[str, str, str]]:
    """``(access, module, variable)`` of every signal the cocotb driver uses through VPI.

    ``access`` is ``rw`` for what the driver writes (the design's inputs and the testbench
    controls) and ``rd`` for what it only reads. Nothing inside the design is listed: the
    driver uses the top's ports, and the back door goes through files. Verilator keeps
    everything else private, which is what makes its model fast.
    """
    ports = top_ports(top_text)
    out = [("rd", TB_MODULE, "rst"), ("rd", TB_MODULE, "clk")]
    for p in ports:
        if p.name in ("clk", "rst"):
            continue
        out.append(("rw" if p.direction == "input" else "rd", TB_MODULE, p.name))
    out += [("rw", TB_MODULE, name) for name in _CONTROL_IN]
    out += [("rd", TB_MODULE, name) for name in _LATCHED + _CONSTANT]
    return out


def export_cosim_tb(config: ArchConfig, build_dir: str | os.PathLike[str] = "build/verilog"
                    ) -> list[Path]:
    """Verilog of ``cosim_tb`` and of the design it wraps, testbench first (both cached)."""
    from .cosim_top import export_cosim_top

    top = export_cosim_top(config, build_dir)
    return [write_cosim_tb(top, config), top]
