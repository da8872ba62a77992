"""``python -m mncore_hdl.sweep SPEC.json|.toml``: run a sweep, print its table, write its plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..paths import BUILD_ROOT
from .execute import run_sweep
from .report import plot, table
from .spec import load_spec
from .store import ResultStore

#: Results of spec ``name`` go to ``<build folder>/sweeps/<name>/`` (``mncore_hdl.paths``:
#: ``build/`` in a checkout) unless ``--out`` says otherwise.
DEFAULT_ROOT = BUILD_ROOT / "sweeps"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2: a bad spec, 1: a point failed, 0: all ran)."""
    ap = argparse.ArgumentParser(prog="python -m mncore_hdl.sweep",
                                 description="Run a design-space sweep of the memory system.")
    ap.add_argument("spec", type=Path, help="sweep spec (.json or .toml)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--ray", action="store_true",
                       help="run each point as a task on a local Ray cluster started here")
    where.add_argument("--address", help="run on the Ray cluster at this address")
    ap.add_argument("--out", type=Path, help="results file (default build/sweeps/NAME/"
                                             "results.jsonl); its points are reused")
    ap.add_argument("--plot", type=Path, help="plot file (default beside the results)")
    ap.add_argument("--x", help="parameter on the efficiency plot's x axis (default: first)")
    ap.add_argument("--retry-failed", action="store_true",
                    help="run again the points stored as errors or timeouts")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    try:
        spec = load_spec(args.spec)
        spec.points()  # every point resolves before any runs
    except (OSError, ValueError) as exc:
        print(f"{ap.prog}: {args.spec}: {exc}", file=sys.stderr)
        return 2
    out = args.out or DEFAULT_ROOT / spec.name / "results.jsonl"
    try:
        store = ResultStore(out)
    except (OSError, ValueError) as exc:
        print(f"{ap.prog}: {out}: {exc}", file=sys.stderr)
        return 2
    result = run_sweep(spec, store, ray=args.ray, address=args.address,
                       retry_failed=args.retry_failed, progress=not args.no_progress)
    print(table(result.records, spec.swept, spec.figures))
    where_run = "Ray" if args.ray or args.address else "this process"
    print(f"\n{len(result.records)} points: {result.computed} run ({where_run}), "
          f"{result.reused} reused from {out}; {len(result.failed)} failed; "
          f"{result.wall_s:.1f} s")
    png = plot(result.records, spec.swept, args.plot or out.with_name("plot.png"),
               title=f"{spec.name} ({spec.backend})", x=args.x)
    print(f"plot: {png}")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
