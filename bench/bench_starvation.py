"""Starvation bounds far past the BMC depth: long random traffic, the worst gap and waits found.

The controller at ``STARVATION_CONFIG`` in Amaranth's simulator under protocol-legal random
traffic on every port: the worst gap, chunk wait and head wait per scheduler and traffic
profile, against their proved bounds (what each figure is and the profiles:
``mncore_hdl.testing.starvation``, which this script prints).

    ./exec_with_env.sh python bench/bench_starvation.py                  # all profiles, ~2 min
    ./exec_with_env.sh python bench/bench_starvation.py --minutes 20     # seeds until then
    ./exec_with_env.sh python bench/bench_starvation.py --profile withhold --seeds 10 \\
        --cycles 50000 --trace                                           # worst traces too

It exits 1 when a measured value exceeds its bound.
"""

from __future__ import annotations

import argparse
import sys
import time

from mncore_hdl.testing.starvation import (
    FR_FCFS,
    IN_ORDER,
    PORTS,
    PROFILES,
    Worst,
    bounds,
    format_trace,
    simulate,
    violations,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), action="append")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per profile and scheduler")
    ap.add_argument("--cycles", type=int, default=20000, help="cycles per seed")
    ap.add_argument("--minutes", type=float, help="keep adding seeds until this long")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--in-order", action="store_true", help="in_order runs too")
    ap.add_argument("--trace", action="store_true", help="print the worst gap's and wait's trace")
    args = ap.parse_args(argv)
    profiles = [PROFILES[n] for n in (args.profile or sorted(PROFILES))]
    configs = [FR_FCFS] + ([IN_ORDER] if args.in_order else [])
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else None
    worst = {}
    bad = []
    simulated = 0
    seed = args.first_seed
    start = time.monotonic()
    while True:
        for config in configs:
            for profile in profiles:
                if profile.directed and (config.scheduler != "fr_fcfs" or seed != args.first_seed):
                    continue   # an fr_fcfs adversary (in order it waits forever), no randomness
                t0 = time.monotonic()
                r = simulate(config, PORTS, seed, args.cycles, profile)
                simulated += args.cycles
                bad += violations(r)
                key = (config.scheduler, profile.name)
                print(f"{config.scheduler:8s} {profile.name:9s} seed {seed:4d}: gap "
                      f"{r.gap.cycles:3d} (switched {r.switched_gap.cycles:3d}) chunk "
                      f"{r.worst_chunk.cycles:3d} head "
                      f"{r.worst_head.cycles:3d} ({r.issues} issues, {r.refreshes} REF, "
                      f"{time.monotonic() - t0:.1f} s)", flush=True)
                for name in ("gap", "switched_gap", "worst_chunk", "worst_head"):
                    w = getattr(r, name)
                    if w.cycles > worst.get((key, name), (Worst(), None))[0].cycles:
                        worst[(key, name)] = (w, seed)
        seed += 1
        if deadline is None and seed >= args.first_seed + args.seeds:
            break
        if deadline is not None and time.monotonic() > deadline:
            break
    print(f"\n{simulated} cycles simulated, seeds {args.first_seed}..{seed - 1}, "
          f"{time.monotonic() - start:.0f} s")
    for config in configs:
        b = bounds(config, PORTS)
        for profile in profiles:
            key = (config.scheduler, profile.name)
            for name, bound in (("gap", b.get("gap")), ("switched_gap", b.get("gap")),
                                ("worst_chunk", b.get("chunk")),
                                ("worst_head", b["head"])):
                if (key, name) not in worst:
                    continue
                w, s = worst[(key, name)]
                print(f"{config.scheduler:8s} {profile.name:9s} {name:11s} {w.cycles:3d} "
                      f"(bound {bound}, seed {s}, ended cycle {w.end})")
                if args.trace and name != "worst_head":
                    print(format_trace(w))
    for line in bad:
        print("OVER THE BOUND:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
