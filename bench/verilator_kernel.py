"""The Verilator model's own speed: the bound ``mncore2:verilator`` is measured against.

The device runs the model under cocotb: its C++ loop (``verilator_main.cpp``) clocks the model
and calls the VPI layer around every evaluation, and the cocotb server (embedded Python) waits
outside the cycle loop. This links the very same model (the device's cached, profile-guided
build) to a C++ ``main`` with no VPI, no cocotb and no Python: it clocks the model for 100k idle
cycles, then fills the four staging memories, runs a DMA write of every Group and a read back
(``cosim_tb``'s DMA engines, as the device's HostWrite and HostRead do), checks that the read
returned what was written, and prints the cycles and the process seconds of each part. Its
cycles per process second is the most any session of this model can reach on this machine.

Run:  PYTHONPATH=sdk:compiler:hdl:sim python bench/verilator_kernel.py [--kib 1024]
(``bench/bench_cosim.py`` prints it beside the device's own figures.) ``--compare DIR DIR``
runs two cached builds' kernels alternately (``--rounds`` times each) and prints medians;
``--instructions DIR ...`` runs each build's kernel once under callgrind (``valgrind``) and
prints the instructions its model's evaluation executes: a count the machine's load does not
change, for comparing models whose speeds differ by less than the noise.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

from mncore_hdl.arch import MNCORE2_SIM, ArchConfig

__all__ = ["kernel_speed"]

_MAIN = r"""
// The verilated cosim_tb alone: no VPI, no cocotb (bench/verilator_kernel.py).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include "Vtop.h"
#include "Vtop___024root.h"
#include "verilated.h"

double sc_time_stamp() { return 0; }
static double cpu() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static Vtop* top;
static void tick() {
    top->clk = 1;
    top->eval();
    top->clk = 0;
    top->eval();
}
static uint64_t word(int g, uint32_t i) {
    uint64_t x = (uint64_t(g) << 56) ^ (uint64_t(i) * 0x9E3779B97F4A7C15ULL);
    return x ^ (x >> 29);
}
#define R top->rootp
#define STAGE(g) R->cosim_tb__DOT__dma##g##__DOT__stage
static void transfer(const char* what, int write, uint32_t lw, uint32_t mask) {
    double start = cpu();
    uint64_t first = R->cosim_tb__DOT__cycle;
    R->cosim_tb__DOT__dma_write = write;
    R->cosim_tb__DOT__dma_path = 0;
    R->cosim_tb__DOT__dma_groups = mask;
    R->cosim_tb__DOT__dma_addr = 0;
    R->cosim_tb__DOT__dma_len = lw;
    R->cosim_tb__DOT__dma_go = 1;
    while (!R->cosim_tb__DOT__dma_done) tick();
    R->cosim_tb__DOT__dma_go = 0;
    for (int i = 0; i < 64; i++) tick();  // the controllers drain
    std::printf("%s %llu %.6f\n", what,
                (unsigned long long)(R->cosim_tb__DOT__cycle - first), cpu() - start);
}
int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    uint32_t lw = std::strtoul(argv[1], nullptr, 10);
    top = new Vtop("");
    top->clk = 0;
    top->eval();
    while (R->cosim_tb__DOT__rst) tick();
    double start = cpu();
    for (int i = 0; i < 100000; i++) tick();
    std::printf("idle 100000 %.6f\n", cpu() - start);
    for (uint32_t i = 0; i < lw; i++) {
        STAGE(0)[i] = word(0, i); STAGE(1)[i] = word(1, i);
        STAGE(2)[i] = word(2, i); STAGE(3)[i] = word(3, i);
    }
    // the engines' first write beat was computed from the staging memory at the last edge,
    // and the memories changed behind the model's back (the device's back door changes them
    // inside the model): one idle edge computes it again
    tick();
    transfer("write", 1, lw, 0xF);
    for (uint32_t i = 0; i < lw; i++) {
        STAGE(0)[i] = STAGE(1)[i] = STAGE(2)[i] = STAGE(3)[i] = 0;
    }
    transfer("read", 0, lw, 0xF);
    for (uint32_t i = 0; i < lw; i++) {
        if (STAGE(0)[i] != word(0, i) || STAGE(1)[i] != word(1, i) ||
            STAGE(2)[i] != word(2, i) || STAGE(3)[i] != word(3, i)) {
            std::printf("mismatch at LW %u\n", i);
            return 1;
        }
    }
    top->final();
    delete top;
    return 0;
}
"""


def _kernel(build_dir: Path) -> Path:
    """The C++ main linked to the model's objects in ``build_dir`` (built once)."""
    from mncore_hdl.tooling.verilator import verilator_env, verilator_root

    exe = build_dir / "kernel_bench"
    if exe.exists():
        return exe
    root = verilator_root()
    assert root is not None, "Verilator is not installed"
    source = build_dir / "kernel_bench.cpp"
    source.write_text(_MAIN)
    objects = [build_dir / f"{name}.o" for name in
               ("verilated", "verilated_dpi", "verilated_vpi", "verilated_threads")]
    # the model's VPI objects need cocotb's VPI library at link time, as the device's loop;
    # a clang-built model's runtime needs libatomic
    import cocotb_tools.config

    libs = cocotb_tools.config.libs_dir
    subprocess.run(["g++", "-O2", "-std=c++20", f"-I{build_dir}", f"-I{root / 'include'}",
                    f"-I{root / 'include' / 'vltstd'}", "-DVM_TRACE=0", str(source),
                    *map(str, objects), str(build_dir / "Vtop__ALL.a"), f"-Wl,-rpath,{libs}",
                    f"-L{libs}", "-lcocotbvpi_verilator", "-latomic", "-o", str(exe)],
                   check=True, env=verilator_env())
    return exe


def kernel_speed(nbytes: int, config: ArchConfig = MNCORE2_SIM
                 ) -> list[tuple[str, int, float, float]]:
    """(what, cycles, process seconds, wall seconds) of 100k idle cycles, and a DMA write and
    read of ``nbytes`` over all Groups, on the device's model with no VPI and no cocotb."""
    from mlsdk.device.rtl.verilator import build_verilator

    lw = nbytes // config.lw_bytes // config.groups
    exe = _kernel(build_verilator(config))
    start = time.perf_counter()
    run = subprocess.run([str(exe), str(lw)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    rows = []
    for line in run.stdout.splitlines():
        what, cycles, seconds = line.split()
        label = {"idle": "idle cycles", "write": f"{nbytes >> 10} KiB DMA write",
                 "read": f"{nbytes >> 10} KiB DMA read"}[what]
        rows.append((f"{label} (kernel)", int(cycles), float(seconds), wall))
    return rows


def compare(folders: list[Path], nbytes: int, rounds: int,
            config: ArchConfig = MNCORE2_SIM) -> None:
    """Run the kernel of each build folder in turn (A, B, A, B, ...) ``rounds`` times and print
    each one's median cycles per process second per part: two models compared under the same
    load (an older model's folder stays in the build cache)."""
    import statistics

    lw = nbytes // config.lw_bytes // config.groups
    exes = [_kernel(Path(folder)) for folder in folders]
    rates: dict[tuple[int, str], list[float]] = {}
    for _ in range(rounds):
        for k, exe in enumerate(exes):
            run = subprocess.run([str(exe), str(lw)], capture_output=True, text=True,
                                 check=True)
            for line in run.stdout.splitlines():
                what, cycles, seconds = line.split()
                rates.setdefault((k, what), []).append(int(cycles) / float(seconds))
    parts = ("idle", "write", "read")
    print(f"{'build folder':48s} " + " ".join(f"{p:>9s}" for p in parts)
          + f"   (cycles per process second, median of {rounds})")
    for k, folder in enumerate(folders):
        print(f"{Path(folder).name:48s} "
              + " ".join(f"{statistics.median(rates[k, p]):9.0f}" for p in parts))


def eval_instructions(folder: Path, lw: int) -> tuple[int, int]:
    """(all, the model's evaluation) instructions of the kernel of the build in ``folder``
    run with ``lw`` LWs per Group under callgrind. The evaluation is Verilator's
    ``_nba_sequent`` and ``_ico_sequent`` functions: every cycle's logic, without the model's
    construction and the main's own loops."""
    import re
    import shutil
    import tempfile

    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(f"--instructions needs {tool} on PATH; it was not found")
    exe = _kernel(Path(folder))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        str(exe), str(lw)], capture_output=True, check=True)
        report = subprocess.run(["callgrind_annotate", "--threshold=100", str(out)],
                                capture_output=True, text=True, check=True).stdout
    counts = [(int(m[1].replace(",", "")), m[2]) for m in
              re.finditer(r"^\s*([\d,]+) \([ \d.]+%\)\s+(\S+)", report, re.M)]
    total = next(n for n, name in counts if name == "PROGRAM")
    evaluation = sum(n for n, name in counts if "_sequent__TOP" in name)
    return total, evaluation


def instructions(folders: list[Path], nbytes: int, config: ArchConfig = MNCORE2_SIM) -> None:
    """Print each build's kernel's instructions under callgrind (:func:`eval_instructions`)."""
    lw = nbytes // config.lw_bytes // config.groups
    print(f"{'build folder':48s} {'all':>14s} {'evaluation':>14s}   "
          f"(instructions, kernel_bench {lw}: 100k idle cycles, {nbytes >> 10} KiB written "
          "and read)")
    for folder in folders:
        total, evaluation = eval_instructions(Path(folder), lw)
        print(f"{Path(folder).name:48s} {total:14,d} {evaluation:14,d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=1024)
    parser.add_argument("--compare", nargs="+", type=Path, metavar="BUILD_DIR",
                        help="instead: run these cached builds' kernels alternately")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--instructions", nargs="+", type=Path, metavar="BUILD_DIR",
                        help="instead: count these cached builds' kernels' instructions "
                             "under callgrind")
    args = parser.parse_args()
    if args.instructions:
        instructions(args.instructions, args.kib << 10)
        return
    if args.compare:
        compare(args.compare, args.kib << 10, args.rounds)
        return
    print(f"{'workload':32s} {'cycles':>9s} {'cpu s':>8s} {'cycles/cpu-s':>13s}")
    for label, cycles, seconds, _ in kernel_speed(args.kib << 10):
        print(f"{label:32s} {cycles:9d} {seconds:8.3f} {cycles / seconds:13.0f}")


if __name__ == "__main__":
    main()
