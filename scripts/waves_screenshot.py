"""Screenshot of the seed flow's waves in GTKWave, for ``docs/cosim.md``.

Runs the seed flow without ``io_spec_constraints`` (so the conversion call runs the layout
converter) on ``mncore2:icarus`` with waves, opens the save file the session wrote in GTKWave
on a virtual X display (Xvfb), and saves a PNG of the screen. Needs Debian's ``gtkwave``,
``xvfb`` and ``x11-apps`` (``xwd``), and Pillow.

    ./exec_with_env.sh python scripts/waves_screenshot.py docs/img/waves_gtkwave.png
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mncore_hdl.paths import BUILD_ROOT

#: The virtual display and its size.
DISPLAY = ":97"
SCREEN = "1600x1000x24"


def seed_waves(folder: Path, device: str) -> Path:
    """Run the unconstrained seed flow with waves into ``folder``; return its save file."""
    from mlsdk.testing.flows import FLOWS, run_flow

    run = run_flow(FLOWS["seed"], f"{device}?waves={folder}", False, folder / "codegen")
    if run.vcd is None:
        raise SystemExit(f"{device} wrote no wave file")
    return run.vcd.with_suffix(".gtkw")


def xwd_to_png(xwd: bytes, png: Path) -> None:
    """Convert an ``xwd -root`` dump (32-bit TrueColor, ZPixmap) to PNG with Pillow."""
    from PIL import Image

    header = [int.from_bytes(xwd[i:i + 4], "big") for i in range(0, 100, 4)]
    size, width, height = header[0], header[4], header[5]
    bytes_per_line, ncolors = header[12], header[19]
    pixels = xwd[size + 12 * ncolors:]
    image = Image.frombuffer("RGBX", (width, height), pixels, "raw", "BGRX", bytes_per_line, 1)
    image.convert("RGB").save(png)


def screenshot(gtkw: Path, png: Path, settle_s: float) -> None:
    """Open ``gtkw`` in GTKWave under Xvfb and write the screen to ``png``."""
    for tool in ("Xvfb", "gtkwave", "xwd"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install -y gtkwave xvfb "
                             "x11-apps)")
    env = {**os.environ, "DISPLAY": DISPLAY}
    xvfb = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", SCREEN, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gtkwave = None
    try:
        time.sleep(1.0)
        rc = Path(tempfile.mkdtemp()) / ".gtkwaverc"
        rc.write_text("splash_disable 1\n")
        gtkwave = subprocess.Popen(["gtkwave", "--rcfile", str(rc), str(gtkw)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(settle_s)
        dump = subprocess.run(["xwd", "-root", "-silent"], env=env, capture_output=True,
                              check=True).stdout
        png.parent.mkdir(parents=True, exist_ok=True)
        xwd_to_png(dump, png)
    finally:
        for proc in (gtkwave, xvfb):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("png", type=Path, help="where to write the screenshot")
    parser.add_argument("--gtkw", type=Path, help="a save file to show (default: run the "
                        "seed flow and show its own)")
    parser.add_argument("--device", default="mncore2:icarus")
    parser.add_argument("--settle", type=float, default=8.0,
                        help="seconds GTKWave gets to load before the screenshot")
    args = parser.parse_args()
    gtkw = args.gtkw or seed_waves(BUILD_ROOT / "waves-screenshot", args.device)
    screenshot(gtkw, args.png, args.settle)
    print(f"wrote {args.png} ({gtkw})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
