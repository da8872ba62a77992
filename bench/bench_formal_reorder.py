"""The fr_fcfs lemmas by k-induction, one line per run: verdicts and times.

``sim/formal/test_formal_starvation.py`` runs all of these as tests (one test per share of
an induction step, the gap lemma in one): this script prints their times side by side, and
runs the gap lemma without the frontend invariants, which the suite does not.

* ``write``: the window's and the write buffer's invariants (``ReorderInvariantProof`` with
  parts ``window``, ``write``): their base case (BMC 1), then their induction step at k = 1
  in the shares of ``step_shares``, Boolector;
* ``read``: the window's and the reorder buffer's invariants (parts ``window``, ``read``):
  their base case (BMC 1), then their induction step at k = 1 in the shares of
  ``step_shares`` (each share asserted in a cycle after one where all held; together they
  are the whole step), Boolector;
* ``gap``: the gap lemma on the whole controller (``StarvationProof(any_port=True)``) at
  k = ``--gap-k`` (16) with each port's frontend invariants assumed, yices;
* ``gap-bare``: the same without them: a counterexample to induction, its VCD named.

    nice -n 10 python bench/bench_formal_reorder.py                      # write, read, gap
    nice -n 10 python bench/bench_formal_reorder.py --runs read --timeout 600

Each line: the run (and share), its verdict (``PASS``, ``FAIL`` / ``UNKNOWN`` with the
failed assertions, ``TIMEOUT``), wall seconds and the CPU seconds of the run's processes
(SymbiYosys, Yosys, smtbmc and the solver; SymbiYosys's own "process time" leaves Yosys
out); a run of shares ends with its overall verdict and sums. Run it under ``nice`` on a
shared machine: wall time follows the load, CPU time much less.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from mncore_hdl.formal.readstream import MEMORY_AS_FLOPS
from mncore_hdl.formal.reorder import REORDER_CONFIG, ReorderInvariantProof, step_shares
from mncore_hdl.formal.runner import BOOLECTOR, prove, tools_available
from mncore_hdl.formal.starvation import STARVATION_CONFIG, StarvationProof

RUNS = ("write", "read", "gap", "gap-bare")

#: The parts of each run of shares (the window's with them: they lean on its order).
PARTS_OF = {"read": ("window", "read"), "write": ("window", "write")}


def _fr_config():
    return STARVATION_CONFIG.replace(scheduler="fr_fcfs", scheduler_window=4,
                                     scheduler_starvation_cap=1)


def _cpu_seconds() -> float:
    """CPU seconds of this process's finished children (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _report(label: str, depth: int, run) -> tuple[bool, float, float]:
    """Call ``run`` (a :func:`prove` of no arguments), print its line; returns whether it
    passed, its wall and CPU seconds."""
    start, cpu = time.monotonic(), _cpu_seconds()
    result = run()
    wall, cpu = time.monotonic() - start, _cpu_seconds() - cpu
    failed = f" failed: {', '.join(result.failures)}" if result.failures else ""
    vcd = f" trace: {result.vcd}" if result.vcd else ""
    print(f"{label:44} k={depth:<3} {result.status:8} {wall:7.1f} s wall, {cpu:6.1f} s CPU"
          f"{failed}{vcd}", flush=True)
    return result.passed, wall, cpu


def _shares_run(name: str, parts, root: Path, timeout: int) -> bool:
    """The invariants of ``parts``: the base case, then every share of the step."""
    ok, wall, cpu = _report(f"{name}: base case (BMC)", 1, lambda: prove(
        ReorderInvariantProof(REORDER_CONFIG, parts), root / "base", depth=1,
        timeout=timeout, engine=BOOLECTOR))
    for k, (share, first) in enumerate(step_shares(REORDER_CONFIG, parts)):
        design = ReorderInvariantProof(REORDER_CONFIG, parts, step=share)
        label = f"{name}: [{share.start}:{share.stop}] {first}"[:44]
        passed, w, c = _report(label, 1, lambda d=design, k=k: prove(
            d, root / f"share{k}", mode="prove", depth=1, timeout=timeout, engine=BOOLECTOR))
        ok, wall, cpu = ok and passed, wall + w, cpu + c
    print(f"{name}: the whole step {'PASS' if ok else 'NOT PROVED'} "
          f"({wall:.1f} s wall, {cpu:.1f} s CPU)", flush=True)
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
        if run in ("read", "write"):
            _shares_run(run, PARTS_OF[run], root / run, args.timeout)
        else:
            design = StarvationProof(_fr_config(), 2, any_port=True,
                                     frontend_invariants=run == "gap")
            _report(run, args.gap_k, lambda d=design, w=root / run: prove(
                d, w, mode="prove", depth=args.gap_k, timeout=args.timeout,
                script=MEMORY_AS_FLOPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
