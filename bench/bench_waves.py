"""The seed flow's wave files: size and wall time per simulator and format, and a window.

For each simulator (``mncore2:icarus``, ``mncore2:verilator``) the seed flow without
``io_spec_constraints`` (its conversion call runs the layout converter) is run with no waves,
with FST waves, with VCD waves and with FST waves of call 2 alone (``calls=2``); on Verilator
also with its FST as the writer leaves it (the session's repack, ``repack_fst``, switched
off). Each line prints the median wall time of the whole flow (the simulator's start
included) over ``--repeat`` interleaved runs and the wave file's size. A format whose model
is not built yet builds it first (Verilator: minutes each; the first run is left out of the
median).

    ./exec_with_env.sh python bench/bench_waves.py [--repeat 2] [--modes none,fst,vcd,window]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mlsdk.device.rtl import verilator
from mlsdk.testing.flows import FLOWS, run_flow

DEVICES = ("mncore2:icarus", "mncore2:verilator")
#: Device-string options of each mode (None: no waves).
MODES = {"none": None, "fst": "format=fst", "vcd": "format=vcd", "window": "format=fst&calls=2",
         "fst-unpacked": "format=fst"}


@contextlib.contextmanager
def _repack(on: bool) -> Iterator[None]:
    """Verilator sessions repack their FST (the default) or leave it as the writer wrote it."""
    saved = verilator.repack_fst
    if not on:
        verilator.repack_fst = lambda path, level=0: False
    try:
        yield
    finally:
        verilator.repack_fst = saved


def run_once(device: str, mode: str, folder: Path) -> tuple[float, int | None]:
    """Wall seconds of one seed flow and its wave file's size (None without waves)."""
    options = MODES[mode]
    name = device if options is None else f"{device}?waves={folder}&{options}"
    with _repack(mode != "fst-unpacked"):
        start = time.perf_counter()
        run = run_flow(FLOWS["seed"], name, False, folder / "codegen")
        wall = time.perf_counter() - start
    return wall, (run.vcd.stat().st_size if run.vcd is not None else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per line")
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--modes", default="none,fst,vcd,window,fst-unpacked")
    args = parser.parse_args()
    lines = [(d, m) for d in args.devices.split(",") for m in args.modes.split(",")
             if m != "fst-unpacked" or "verilator" in d]
    walls: dict[tuple[str, str], list[float]] = {line: [] for line in lines}
    sizes: dict[tuple[str, str], int | None] = {}
    with tempfile.TemporaryDirectory(prefix="bench_waves_") as tmp:
        for round_ in range(args.repeat + 1):  # round 0 builds what is missing, untimed
            for device, mode in lines:
                folder = Path(tmp) / f"{round_}-{device.split(':')[1]}-{mode}"
                wall, sizes[device, mode] = run_once(device, mode, folder)
                if round_:
                    walls[device, mode].append(wall)
    print(f"{'device':20s} {'waves':14s} {'wall s (median)':>16s} {'file MB':>8s}")
    for device, mode in lines:
        size = sizes[device, mode]
        shown = "-" if size is None else f"{size / 1e6:.2f}"
        print(f"{device:20s} {mode:14s} {statistics.median(walls[device, mode]):16.1f} "
              f"{shown:>8s}")


if __name__ == "__main__":
    main()
