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
  (``sim/sdk/test_cosim_dma.py`` compares them).
- **bulk back door**: a toggle of ``mem_go`` loads or dumps a range of any backing store or
  staging memory through one file, with no clock edge (raw words on Verilator, hex lines on
  Icarus: ``mem_binary``); ``mem_ack`` toggles when it is done.
- **for the waves**: every port's payload decoded into its fields (``host__0__req__addr``,
  ``..._write``, ``..._length``, ``wdata__data``/``strb``, ``rdata__data``/``error``, from
  ``contracts.cosim.payload_fields``, as the design sees them: after the DMA muxes), and the
  command track the driver writes (``mark_kind``/``call``/``buffer``/``seq``); ``waves_off``
  pauses Icarus's dump (``$dumpoff``; Verilator's loop reads it itself).

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
``mark_*``                the running host command (``contracts.testbench.CommandKind``)
``waves_off``             1: the dump is paused (a window of calls)
========================  =============================================================
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..arch import LW_BYTES, ArchConfig
from ..contracts import testbench as tb
from ..contracts.cosim import (
    PAYLOAD,
    RDATA,
    READY,
    REQ,
    STREAMS,
    TB_DUT_INSTANCE,
    TOP_PATHS,
    VALID,
    WDATA,
    backing_store,
    field_port,
    payload_fields,
    requester_prefix,
    stream_member,
    stream_port,
)
from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import addr_bits, max_burst
from ..tooling.files import atomic_write

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


#: Rising edges the testbench holds the design in reset for.
RESET_EDGES = 3
#: Bits of the write strobe above the 64-bit data word in a ``wdata`` payload.
STROBE_BITS = LW_BYTES
#: The Verilog names of a requester port's stream signals the DMA engines drive or read.
_REQ_VALID, _REQ_READY, _REQ_PAYLOAD = (stream_member(REQ, s) for s in (VALID, READY, PAYLOAD))
_WDATA_VALID, _WDATA_READY, _WDATA_PAYLOAD = (stream_member(WDATA, s)
                                              for s in (VALID, READY, PAYLOAD))
_RDATA_VALID, _RDATA_READY, _RDATA_PAYLOAD = (stream_member(RDATA, s)
                                              for s in (VALID, READY, PAYLOAD))
#: Their inputs of the design, which ``cosim_tb`` muxes between the driver and its engines.
_MUXED = (_REQ_VALID, _REQ_PAYLOAD, _WDATA_VALID, _WDATA_PAYLOAD, _RDATA_READY)

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


def _lane_wiring(g: int) -> list[str]:
    """Mux the Python-driven port inputs of Group ``g`` with its DMA engine."""
    lines = []
    for p, path in enumerate(TOP_PATHS):
        pre = requester_prefix(path, g)
        use = f"{tb.DMA_GO} && {tb.DMA_GROUPS}[{g}] && {tb.DMA_PATH} == {p}"
        lines += [
            f"  wire {pre}dma = {use};",
            f"  wire {pre}{_REQ_VALID}_m = {pre}dma ? dma{g}_req_valid : {pre}{_REQ_VALID};",
            f"  wire [{{REQW}}:0] {pre}{_REQ_PAYLOAD}_m = {pre}dma ? dma{g}_req_payload"
            f" : {pre}{_REQ_PAYLOAD};",
            f"  wire {pre}{_WDATA_VALID}_m = {pre}dma ? dma{g}_wdata_valid"
            f" : {pre}{_WDATA_VALID};",
            f"  wire [71:0] {pre}{_WDATA_PAYLOAD}_m = {pre}dma ? dma{g}_wdata_payload"
            f" : {pre}{_WDATA_PAYLOAD};",
            f"  wire {pre}{_RDATA_READY}_m = {pre}dma ? dma_rdata_ready : {pre}{_RDATA_READY};",
        ]
    return lines


def _control(config: ArchConfig) -> list[TbPort]:
    """The testbench's own ports (``contracts.testbench``) but the constant ones."""
    return [TbPort("input" if direction == "in" else "output", name, width)
            for name, (direction, width) in tb.control_ports(config).items()
            if name not in tb.CONSTANT]


def _dma_engine(g: int, config: ArchConfig, req_w: int) -> list[str]:
    """Group ``g``'s DMA engine instance, its port muxes and its outputs."""
    aw = addr_bits(config)
    row = max_burst(config)
    sel = " : ".join(f"{tb.DMA_PATH} == {p} ? {requester_prefix(path, g)}" + "{}"
                     for p, path in enumerate(TOP_PATHS[:-1]))
    sel += f" : {requester_prefix(TOP_PATHS[-1], g)}" + "{}"

    def pick(member: str) -> str:
        return sel.replace("{}", member)

    out = [
        f"  wire dma{g}_req_valid, dma{g}_wdata_valid;",
        f"  wire [{req_w - 1}:0] dma{g}_req_payload;",
        f"  wire [71:0] dma{g}_wdata_payload;",
        f"  cosim_tb_dma #(.AW({aw}), .LENW({req_w - aw - 1}), .ROWW({row.bit_length() - 1}), "
        f".DEPTH({config.sim_window_lw})) dma{g} (",
        f"    .clk({tb.CLOCK}), .go({tb.DMA_GO}), .write({tb.DMA_WRITE}),"
        f" .en({tb.DMA_GROUPS}[{g}]),",
        f"    .addr({tb.DMA_ADDR}), .len({tb.DMA_LEN}),",
        f"    .req_ready({pick(_REQ_READY)}), .wdata_ready({pick(_WDATA_READY)}),",
        f"    .rdata_valid({pick(_RDATA_VALID)}), .rdata_payload({pick(_RDATA_PAYLOAD)}),",
        f"    .req_valid(dma{g}_req_valid), .req_payload(dma{g}_req_payload),",
        f"    .wdata_valid(dma{g}_wdata_valid), .wdata_payload(dma{g}_wdata_payload),",
        f"    .busy(dma_busy[{g}]), .busy_next(dma_busy_next[{g}]),"
        f" .err_next(dma_err_next[{g}]));",
    ]
    return out + [line.replace("{REQW}", str(req_w - 1)) for line in _lane_wiring(g)]


def _dma_done() -> list[str]:
    """The transfer's end: ``dma_done``, ``dma_cycles`` and ``dma_error`` (latched)."""
    go, done, cycles, error = tb.DMA_GO, tb.DMA_DONE, tb.DMA_CYCLES, tb.DMA_ERROR
    return [
        f"  reg [{COUNTER_BITS - 1}:0] dma_count = 0;",
        f"  always @(posedge {tb.CLOCK}) begin",
        f"    if (!{go}) begin",
        f"      {done} <= 0;",
        "      dma_count <= 0;",
        f"    end else if (!{done}) begin",
        "      dma_count <= dma_count + 1;",
        "      if (!(|dma_busy_next)) begin",
        "        // results before done: a simulator applies one process's updates in order, so",
        f"        // whoever wakes on {done} already reads them",
        f"        {cycles} <= dma_count + 1;",
        f"        {error} <= dma_err_next;",
        f"        {done} <= 1;",
        "      end",
        "    end",
        "  end",
    ]


def _back_door(groups: int) -> list[str]:
    """The bulk back door: a toggle of ``mem_go`` loads or dumps a range of one memory.

    Verilator reads and writes the file as raw 64-bit words ($fread: big-endian; %u:
    little-endian), 5x faster than its $readmemh parser; Icarus keeps hex, which its
    $readmemh/$writememh handle faster than a word loop. ``mem_binary`` says which.
    """
    lo, hi, go, sel, dump = tb.MEM_LO, tb.MEM_HI, tb.MEM_GO, tb.MEM_SEL, tb.MEM_DIR
    out = [
        "  reg [8*1024-1:0] memfile;",
        f'  initial if (!$value$plusargs("{MEMFILE_PLUSARG}=%s", memfile))'
        f' memfile = "{MEMFILE_DEFAULT}";',
        "`ifdef VERILATOR",
        f"  wire {tb.MEM_BINARY} = 1'b1;",
        "  integer mem_fd, mem_i, mem_n;",
        "`else",
        f"  wire {tb.MEM_BINARY} = 1'b0;",
        "`endif",
        f"  always @(posedge {go} or negedge {go}) begin",
        f"    case ({sel})",
    ]
    for g in range(groups):
        for k, mem in ((g, backing_store("cosim_tb", g)), (groups + g, f"dma{g}.stage")):
            out += ["`ifdef VERILATOR",
                    f"      {k}: if ({dump}) begin",
                    '        mem_fd = $fopen(memfile, "wb");',
                    f"        for (mem_i = {lo}; mem_i <= {hi}; mem_i = mem_i + 1)",
                    f'          $fwrite(mem_fd, "%u", {mem}[mem_i]);',
                    "        $fclose(mem_fd);",
                    "      end else begin",
                    '        mem_fd = $fopen(memfile, "rb");',
                    f"        mem_n = $fread({mem}, mem_fd, {lo}, {hi} - {lo} + 1);",
                    "        $fclose(mem_fd);",
                    "      end",
                    "`else",
                    f"      {k}: if ({dump}) $writememh(memfile, {mem}, {lo}, {hi});",
                    f"         else $readmemh(memfile, {mem}, {lo}, {hi});",
                    "`endif"]
    return out + ["      default: ;", "    endcase", f"    {tb.MEM_ACK} <= !{tb.MEM_ACK};",
                  "  end"]


def _decoded_fields(config: ArchConfig) -> list[str]:
    """Every port's payload split into its fields, as the design sees it (after the DMA
    muxes): named wires the waves show instead of one packed vector."""
    out = []
    for path in TOP_PATHS:
        for g in range(config.groups):
            for stream, fields in payload_fields(config).items():
                source = stream_port(path, g, stream, PAYLOAD) + ("_m" if STREAMS[stream]
                                                                  else "")
                low = 0
                for name, width in fields.items():
                    rng = f"[{width - 1}:0] " if width > 1 else ""
                    bits = f"[{low + width - 1}:{low}]" if width > 1 else f"[{low}]"
                    out.append(f"  wire {rng}{field_port(path, g, stream, name)} = "
                               f"{source}{bits};")
                    low += width
    return out


def _dump_control() -> list[str]:
    """``waves_off`` pauses Icarus's dump; Verilator's C++ loop reads it instead (it has no
    ``$dumpoff`` for a trace its loop opened)."""
    return ["`ifndef VERILATOR",
            f"  always @({tb.WAVES_OFF}) if ({tb.WAVES_OFF}) $dumpoff; else $dumpon;",
            "`endif"]


def cosim_tb_verilog(top_text: str, config: ArchConfig) -> str:
    """Verilog of ``cosim_tb`` (the testbench top and its DMA engine) for ``cosim_top``."""
    ports = top_ports(top_text)
    by_name = {p.name: p for p in ports}
    groups = config.groups
    req_w = by_name[stream_port(TOP_PATHS[0], 0, REQ, PAYLOAD)].width
    row = max_burst(config)
    roww = row.bit_length() - 1
    if ((1 << roww) != row
            or by_name[stream_port(TOP_PATHS[0], 0, WDATA, PAYLOAD)].width != 64 + STROBE_BITS):
        raise ValueError(f"cosim_tb expects a power-of-two row and 72-bit wdata, got row={row}")
    muxed = {requester_prefix(path, g) + m for g in range(groups) for path in TOP_PATHS
             for m in _MUXED}
    control = _control(config)
    # The only port is the clock. Every other input of the design is a register that VPI
    # writes: Verilator re-evaluates logic fed by top-level inputs (its "ico" region) on every
    # evaluation, which for this design (every next-state function depends on ``rst``) cost
    # about 40% of the simulation time when they were ports.
    out = ["// Generated by mncore_hdl.top.cosim_tb from cosim_top; do not edit.",
           f"module {TB_MODULE}({tb.CLOCK});", f"  input {tb.CLOCK};"]
    out += [p.signal() for p in ports + control
            if p.name not in (tb.CLOCK, tb.RESET) and p.name not in tb.LATCHED]
    out += [f"  reg [{p.width - 1}:0] {p.name} = 0;" for p in control if p.name in tb.LATCHED]
    # Reset is generated here, not written by VPI: every next-state function of the design
    # depends on it, so as a VPI-writable signal it would be re-evaluated on every evaluation.
    # It is high for the first RESET_EDGES rising edges; the server waits for it to fall.
    out += [f"  reg [3:0] reset_left = {RESET_EDGES};",
            f"  wire {tb.RESET} = reset_left != 0;",
            f"  always @(posedge {tb.CLOCK}) if ({tb.RESET}) reset_left <= reset_left - 1;"]
    # -- DMA engines -------------------------------------------------------------------------
    out.append(f"  wire [{groups - 1}:0] dma_busy, dma_busy_next, dma_err_next;")
    out.append(f"  wire dma_rdata_ready = {tb.DMA_GO} && !{tb.DMA_WRITE} && (|dma_busy);")
    for g in range(groups):
        out += _dma_engine(g, config, req_w)
    out += _dma_done()
    out += _back_door(groups)
    out += _decoded_fields(config) + _dump_control()
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
        atomic_write(path, text)
    return path


def public_signals(top_text: str) -> list[tuple[str, str, str]]:
    """``(access, module, variable)`` of every signal the cocotb driver uses through VPI.

    ``access`` is ``rw`` for what the driver writes (the design's inputs and the testbench
    controls) and ``rd`` for what it only reads. Nothing inside the design is listed: the
    driver uses the top's ports, and the back door goes through files. Verilator keeps
    everything else private, which is what makes its model fast.
    """
    ports = top_ports(top_text)
    out = [("rd", TB_MODULE, tb.RESET), ("rd", TB_MODULE, tb.CLOCK)]
    for p in ports:
        if p.name in (tb.CLOCK, tb.RESET):
            continue
        out.append(("rw" if p.direction == "input" else "rd", TB_MODULE, p.name))
    out += [("rw", TB_MODULE, name) for name, direction in tb.CONTROL.items()
            if direction == "in"]
    out += [("rd", TB_MODULE, name) for name in tb.LATCHED + tb.CONSTANT]
    return out


def export_cosim_tb(config: ArchConfig, build_dir: str | os.PathLike[str] = "build/verilog"
                    ) -> list[Path]:
    """Verilog of ``cosim_tb`` and of the design it wraps, testbench first (both cached)."""
    # Here, not at the top: the cocotb server imports this module inside the simulator, where
    # loading the Amaranth design would only cost start-up time.
    from .cosim_top import export_cosim_top

    top = export_cosim_top(config, build_dir)
    return [write_cosim_tb(top, config), top]
