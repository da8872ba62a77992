"""The fr_fcfs lemmas by k-induction, the runs too long for the test suite: verdicts and times.

``sim/formal/test_formal_starvation.py`` proves the cap lemma for all time given the reorder
frontend's state invariants (k = 1, seconds) and checks the invariants from reset (BMC). The
runs here are the invariants' own induction steps and the gap lemma's:

* ``write``: the window's and the write buffer's invariants (``ReorderInvariantProof`` with
  parts ``window``, ``write``), k = 1, Boolector, in one run;
* ``read``: the window's and the reorder buffer's invariants (parts ``window``, ``read``):
  their base case (BMC 1), then their induction step at k = 1 in the shares of
  ``step_shares`` (each share asserted in a cycle after one where all held; together they
  are the whole step), Boolector but yices for the beats-owed equation;
* ``gap``: the gap lemma on the whole controller (``StarvationProof(any_port=True)``) at
  k = ``--gap-k`` (16) with each port's frontend invariants assumed;
* ``gap-bare``: the same without them: a counterexample to induction, its VCD named.

    nice -n 10 python bench/bench_formal_reorder.py                      # write, read, gap
    nice -n 10 python bench/bench_formal_reorder.py --runs read --timeout 600

Each line: the run (and share), its verdict (``PASS``, ``FAIL`` / ``UNKNOWN`` with the
failed assertions, ``TIMEOUT``), wall seconds and the solver's process seconds as
SymbiYosys reports them; a run of shares ends with its overall verdict. Run it under
``nice`` on a shared machine: wall time follows the load, process time much less.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from mncore_hdl.formal.readstream import MEMORY_AS_FLOPS
from mncore_hdl.formal.reorder import REORDER_CONFIG, ReorderInvariantProof, step_shares
from mncore_hdl.formal.runner import BOOLECTOR, DEFAULT_ENGINE, prove, tools_available
from mncore_hdl.formal.starvation import STARVATION_CONFIG, StarvationProof

RUNS = ("write", "read", "gap", "gap-bare")

#: The parts of the reorder buffer's run (the window's with them: they lean on its order).
READ_PARTS = ("window", "read")


def _fr_config():
    return STARVATION_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                     scheduler_starvation_cap=1)


def _process_seconds(log: str) -> str:
    lines = [line for line in log.splitlines() if "Elapsed process time" in line]
    return lines[-1].rsplit("(", 1)[-1].rstrip(")") if lines else "?"


def _report(label: str, depth: int, run) -> bool:
    """Call ``run`` (a :func:`prove` of no arguments), print its line; True if it passed."""
    start = time.monotonic()
    result = run()
    wall = time.monotonic() - start
    failed = f" failed: {', '.join(result.failures)}" if result.failures else ""
    vcd = f" trace: {result.vcd}" if result.vcd else ""
    print(f"{label:44} k={depth:<3} {result.status:8} {wall:7.1f} s wall, "
          f"{_process_seconds(result.log)} s process{failed}{vcd}", flush=True)
    return result.passed


def _read_run(root: Path, timeout: int) -> bool:
    """The reorder buffer's invariants: base case, then every share of the step."""
    ok = _report("read: base case (BMC)", 1, lambda: prove(
        ReorderInvariantProof(REORDER_CONFIG, READ_PARTS), root / "base", depth=1,
        timeout=timeout, engine=BOOLECTOR))
    for k, (share, name) in enumerate(step_shares(REORDER_CONFIG, READ_PARTS)):
        engine = DEFAULT_ENGINE if "beats owed" in name else BOOLECTOR
        design = ReorderInvariantProof(REORDER_CONFIG, READ_PARTS, step=share)
        label = f"read: [{share.start}:{share.stop}] {name}"[:44]
        ok &= _report(label, 1, lambda d=design, k=k, e=engine: prove(
            d, root / f"share{k}", mode="prove", depth=1, timeout=timeout, engine=e))
    print(f"read: the whole step {'PASS' if ok else 'NOT PROVED'}", flush=True)
    return ok


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
        if run == "read":
            _read_run(root / run, args.timeout)
        elif run == "write":
            design = ReorderInvariantProof(REORDER_CONFIG, ("window", "write"))
            _report(run, 1, lambda d=design, w=root / run: prove(d, w, mode="prove", depth=1,
                                                   timeout=args.timeout, engine=BOOLECTOR))
        else:
            design = StarvationProof(_fr_config(), 2, any_port=True,
                                     frontend_invariants=run == "gap")
            _report(run, args.gap_k, lambda d=design, w=root / run: prove(
                d, w, mode="prove", depth=args.gap_k, timeout=args.timeout,
                script=MEMORY_AS_FLOPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
