"""Soak: random command streams, checked call by call, with RSS sampled over time.

What a seed runs and checks: ``mlsdk.testing.soak``, which this script prints. With two
devices (``--icarus``: ``mncore2:icarus`` against ``mncore2:auto``), each seed also compares
the two devices' records and their whole DRAM.

    ./exec_with_env.sh python3 bench/soak.py --seeds 1000
    ./exec_with_env.sh python3 bench/soak.py --minutes 10
    ./exec_with_env.sh python3 bench/soak.py --seeds 0 --icarus-seeds 50 --icarus-minutes 10

It prints, per part, the calls run, the mismatches (each with its seed), RSS at the start and
end and its growth, and the seeds run. It exits 1 when there was a mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time

from mlsdk.testing.soak import soak, summary
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1000,
                        help="seeds on the functional model (0: skip it)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop the functional part after this long")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=24, help="commands per seed")
    parser.add_argument("--icarus-seeds", type=int, default=0,
                        help="seeds on mncore2:icarus against mncore2:auto (0: skip)")
    parser.add_argument("--icarus-minutes", type=float, default=None)
    parser.add_argument("--icarus-steps", type=int, default=12)
    args = parser.parse_args(argv)
    failed = False
    if args.seeds:
        start = time.monotonic()
        stats = soak(["mncore2:auto"], MNCORE2,
                     range(args.first_seed, args.first_seed + args.seeds), args.minutes,
                     args.steps, 4096)
        print(summary("mncore2:auto against the interpreter", stats,
                      time.monotonic() - start), flush=True)
        failed |= bool(stats.mismatches)
    if args.icarus_seeds:
        start = time.monotonic()
        stats = soak(["mncore2:icarus", "mncore2:auto"], MNCORE2_SIM,
                     range(args.first_seed, args.first_seed + args.icarus_seeds),
                     args.icarus_minutes, args.icarus_steps, 256)
        print(summary("mncore2:icarus against mncore2:auto and the interpreter", stats,
                      time.monotonic() - start), flush=True)
        failed |= bool(stats.mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
