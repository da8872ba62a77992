"""Icarus's own speed on a host transfer: the bound ``mncore2:icarus`` is measured against.

The device runs a HostWrite or HostRead as one round trip through the testbench's DMA engines
(``mncore_hdl.top.cosim_tb``), with cocotb's clock and the driver waiting outside the cycle
loop. This runs the same ``cosim_tb`` with no cocotb and no VPI at all: a Verilog top generates
the clock, loads the staging memories from a file, starts a write of every Group, then a read
back, and prints a line at the start and end of each transfer. Python stamps those lines as
they arrive, so the figure is the simulator alone on the same cycles. The read-back image is
dumped and compared with what was written, so the transfers did move the data.

Run:  PYTHONPATH=sdk:compiler:hdl:sim python bench/icarus_kernel.py [--kib 1024]
(``bench/bench_cosim.py`` prints it beside the device's own HostWrite and HostRead.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from mlsdk.device.rtl.builds import BUILD_ROOT
from mlsdk.device.rtl.dma import read_word_file, write_word_file
from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.top.cosim_tb import RESET_EDGES, TB_MODULE, export_cosim_tb

__all__ = ["kernel_transfer_speed"]

_TOP = """\
`timescale 1ns/1ps
module kernel_bench;
  reg clk = 0;
  integer i;
  always #1 clk = ~clk;
  {tb} tb(.clk(clk));
  initial begin
{load}
    repeat ({reset}) @(posedge clk);
{transfers}
    $finish;
  end
endmodule
"""

_TRANSFER = """\
    tb.dma_write = {write};
    tb.dma_path = 0;
    tb.dma_groups = {mask};
    tb.dma_addr = 0;
    tb.dma_len = {lw};
    @(negedge clk);
    $display("start {what}"); $fflush;
    tb.dma_go = 1;
    wait (tb.dma_done == 1);
    $display("done {what} %0d", tb.dma_cycles); $fflush;
    @(negedge clk);
    tb.dma_go = 0;
    repeat (64) @(posedge clk);  // the controllers drain the write
"""


def kernel_transfer_speed(nbytes: int, config: ArchConfig = MNCORE2_SIM,
                          keep: Path | None = None) -> list[tuple[str, int, float]]:
    """``(what, cycles, wall s)`` of a HostWrite then a HostRead of ``nbytes`` over all Groups,
    on Icarus with no Python in the simulation (see the module's docstring).

    Raises RuntimeError when the read-back image differs from the one written.
    """
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        raise RuntimeError("Icarus Verilog (iverilog, vvp) is not on PATH")
    groups = config.groups
    lw = nbytes // config.lw_bytes // groups
    if lw <= 0 or lw > config.sim_window_lw:
        raise ValueError(f"{nbytes} bytes over {groups} Groups must be 1 to "
                         f"{config.sim_window_lw} LW per Group")
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="icarus_kernel_"))
    work.mkdir(parents=True, exist_ok=True)
    image = np.random.default_rng(0).integers(0, 1 << 63, (groups, lw), dtype=np.uint64)
    load = []
    for g in range(groups):
        write_word_file(work / f"image{g}.hex", image[g], binary=False)  # the back door's format
        load.append(f'    $readmemh("image{g}.hex", tb.dma{g}.stage, 0, {lw - 1});')
    mask = (1 << groups) - 1
    # The read lands in the staging memories the write came from: they are cleared between
    # the two, so a read that moved nothing cannot pass the comparison.
    clear = "".join(f"    for (i = 0; i < {lw}; i = i + 1) tb.dma{g}.stage[i] = 0;\n"
                    for g in range(groups))
    dumps = "".join(f'    $writememh("read{g}.hex", tb.dma{g}.stage, 0, {lw - 1});\n'
                    for g in range(groups))
    transfers = (_TRANSFER.format(write=1, mask=mask, lw=lw, what="HostWrite") + clear
                 + _TRANSFER.format(write=0, mask=mask, lw=lw, what="HostRead") + dumps)
    top = _TOP.format(tb=TB_MODULE, load="\n".join(load), reset=RESET_EDGES + 2,
                      transfers=transfers)
    (work / "kernel_bench.v").write_text(top)
    sources = export_cosim_tb(config, BUILD_ROOT / "verilog")  # the devices' cached export
    vvp = work / "kernel.vvp"
    subprocess.run(["iverilog", "-g2012", "-s", "kernel_bench", "-o", str(vvp),
                    str(work / "kernel_bench.v"), *map(str, sources)], check=True)
    proc = subprocess.Popen(["vvp", "-n", str(vvp), "-none"], cwd=work, stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    assert proc.stdout is not None
    rows, started = [], 0.0
    for line in proc.stdout:
        now = time.perf_counter()
        words = line.split()
        if words[:1] == ["start"]:
            started = now
        elif words[:1] == ["done"]:
            rows.append((words[1], int(words[2]), now - started))
    if proc.wait() != 0 or len(rows) != 2:
        raise RuntimeError(f"the kernel bench failed (exit {proc.returncode}, rows {rows})")
    for g in range(groups):
        if not np.array_equal(read_word_file(work / f"read{g}.hex", lw, binary=False), image[g]):
            raise RuntimeError(f"Group {g}: the read-back image differs from the one written")
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return [(f"{nbytes >> 10} KiB {what} (kernel)", cycles, wall) for what, cycles, wall in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=1024)
    args = parser.parse_args()
    load = os.getloadavg()
    for what, cycles, wall in kernel_transfer_speed(args.kib << 10):
        print(f"{what:32s} {cycles:9d} {wall:8.2f} s {cycles / wall:9.0f} cycles/s")
    print(f"(load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after)")


if __name__ == "__main__":
    main()
