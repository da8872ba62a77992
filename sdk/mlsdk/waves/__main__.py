"""``python -m mlsdk.waves FILE [FILE ...]``: the per-command summary of each wave file."""

from __future__ import annotations

import argparse
import sys

from . import Waves, format_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlsdk.waves",
        description="Per-command summary (cycles, beats per port, converter busy cycles) of "
                    "a wave file an RTL device wrote (?waves=DIR), from the file alone.")
    parser.add_argument("files", nargs="+", help="an .fst or .vcd file")
    args = parser.parse_args(argv)
    status = 0
    for i, path in enumerate(args.files):
        if i:
            print()
        try:
            print(format_summary(Waves(path)))
        except (OSError, ValueError, KeyError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
