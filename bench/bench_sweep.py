"""A sweep run twice, in one process and on a local Ray cluster: wall times, speed-up, agreement.

    ./exec_with_env.sh python bench/bench_sweep.py                       # 48 Icarus points
    ./exec_with_env.sh python bench/bench_sweep.py bench/sweeps/model_convert_buffer.json

Both runs start from empty result stores (``build/sweeps/<name>/{process,ray}.jsonl``) and a
warm RTL build cache (one point is run first to build the design), so the wall times compare
running the points, not building the model. The Ray run's plot is written beside its results.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from mncore_hdl.paths import BUILD_ROOT, repo_root
from mncore_hdl.sweep import ResultStore, SweepSpec, load_spec, run_sweep
from mncore_hdl.sweep.report import plot, table

DEFAULT_SPEC = repo_root() / "bench" / "sweeps" / "rtl_ports_pattern_burst.json"


def _fresh(path: Path) -> ResultStore:
    if path.exists():
        path.unlink()
    return ResultStore(path)


def _warm(spec: SweepSpec, out: Path) -> float:
    """Run the first point once (its build is then cached for both runs); its wall time."""
    first = SweepSpec(f"{spec.name}-warm", grid={k: v[:1] for k, v in spec.grid.items()},
                      fixed=spec.fixed, backend=spec.backend, base_config=spec.base_config)
    t0 = time.perf_counter()
    run_sweep(first, _fresh(out / "warm.jsonl"), progress=False)
    return time.perf_counter() - t0


def _same(a: list[dict], b: list[dict]) -> bool:
    def strip(rs: list[dict]) -> list[tuple]:
        return [(r["key"], r["status"], r["figures"].get("cycles")) for r in rs]
    return strip(a) == strip(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SPEC)
    ap.add_argument("--plot", type=Path, help="plot file (default build/sweeps/NAME/plot.png)")
    ap.add_argument("--x", help="parameter on the efficiency plot's x axis")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    out = BUILD_ROOT / "sweeps" / spec.name
    warm = _warm(spec, out)
    print(f"warm-up point (builds the design when not cached): {warm:.1f} s")
    one = run_sweep(spec, _fresh(out / "process.jsonl"))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = run_sweep(spec, _fresh(out / "ray.jsonl"), ray=True)
    print(table(ray.records, spec.swept, spec.figures))
    cpus = os.cpu_count()
    print(f"\n{len(ray.records)} points ({spec.backend}), {cpus} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"one process: {one.wall_s:7.1f} s   ({len(one.failed)} failed)")
    print(f"local Ray:   {ray.wall_s:7.1f} s   ({len(ray.failed)} failed; "
          "includes starting the cluster)")
    print(f"speed-up:    {one.wall_s / ray.wall_s:7.2f}x")
    print(f"same figures in both runs: {'yes' if _same(one.records, ray.records) else 'NO'}")
    png = plot(ray.records, spec.swept, args.plot or out / "plot.png",
               title=f"{spec.name} ({spec.backend}, {len(ray.records)} points)", x=args.x)
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
