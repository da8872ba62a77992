"""The fr_fcfs lemmas by k-induction, the runs too long for the test suite: verdicts and times.

``sim/formal/test_formal_starvation.py`` proves the cap lemma for all time given the reorder
frontend's state invariants (k = 1, seconds) and checks the invariants from reset (BMC). The
runs here are the invariants' own induction steps and the gap lemma's, each a few minutes
of solver time or more:

* ``write``: the window's and the write buffer's invariants (``ReorderInvariantProof`` with
  parts ``window``, ``write``), k = 1, Boolector: closes;
* ``read``: the reorder buffer's invariants (parts ``window``, ``read``), k = 1: the step
  does not finish within the timeout (docs/verification.md);
* ``gap``: the gap lemma on the whole controller (``StarvationProof(any_port=True)``) at
  k = ``--gap-k`` (16) with each port's frontend invariants assumed: closes;
* ``gap-bare``: the same without them: a counterexample to induction, its VCD named.

    ./exec_with_env.sh python bench/bench_formal_reorder.py                 # write, read, gap
    ./exec_with_env.sh python bench/bench_formal_reorder.py --runs write --timeout 900

Each line: the run, its verdict (``PASS``, ``UNKNOWN`` with the failed step's assertions,
``TIMEOUT``), wall seconds and the solver's process seconds as SymbiYosys reports them. Run it
under ``nice`` on a shared machine: wall time follows the load, process time much less.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from mncore_hdl.formal.readstream import MEMORY_AS_FLOPS
from mncore_hdl.formal.reorder import REORDER_CONFIG, ReorderInvariantProof
from mncore_hdl.formal.runner import BOOLECTOR, DEFAULT_ENGINE, prove, tools_available
from mncore_hdl.formal.starvation import STARVATION_CONFIG, StarvationProof

RUNS = ("write", "read", "gap", "gap-bare")


def _fr_config():
    return STARVATION_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                     scheduler_starvation_cap=1)


def _design(run: str, gap_k: int):
    """``(design, depth, engine, script)`` of one run."""
    if run == "write":
        return ReorderInvariantProof(REORDER_CONFIG, ("window", "write")), 1, BOOLECTOR, ()
    if run == "read":
        return ReorderInvariantProof(REORDER_CONFIG, ("window", "read")), 1, DEFAULT_ENGINE, ()
    proof = StarvationProof(_fr_config(), 2, any_port=True, frontend_invariants=run == "gap")
    return proof, gap_k, DEFAULT_ENGINE, MEMORY_AS_FLOPS


def _process_seconds(log: str) -> str:
    lines = [line for line in log.splitlines() if "Elapsed process time" in line]
    return lines[-1].rsplit("(", 1)[-1].rstrip(")") if lines else "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=["write", "read", "gap"])
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    parser.add_argument("--gap-k", type=int, default=16, help="induction length of the gap runs")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args(argv)
    missing = tools_available(BOOLECTOR) or tools_available()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    root = args.workdir or Path(tempfile.mkdtemp(prefix="formal_reorder_"))
    for run in args.runs:
        design, depth, engine, script = _design(run, args.gap_k)
        start = time.monotonic()
        result = prove(design, root / run, mode="prove", depth=depth, timeout=args.timeout,
                       engine=engine, script=script)
        wall = time.monotonic() - start
        failed = f" failed: {', '.join(result.failures)}" if result.failures else ""
        vcd = f" trace: {result.vcd}" if result.vcd else ""
        print(f"{run:9} k={depth:<3} {result.status:8} {wall:7.1f} s wall, "
              f"{_process_seconds(result.log)} s process{failed}{vcd}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
