"""The compile cache: a cold compile against a cache hit, in this process and in a fresh one.

For each function (an add, an ``nn.Linear(1024, 1024)`` closure, an 8-layer MLP) it prints the
median wall time of:
- ``capture``: tracing the function into the IR alone (a hit pays it too: the key is the graph);
- ``no cache``: a compile without cache options (capture, pipeline, writing the codegen dir);
- ``miss``: a compile into an empty cache (the same, plus the key and storing the entry);
- ``hit``: a compile the cache answers (capture, key, reading the entry, linking the codegen
  dir); ``saved`` is ``no cache`` minus ``hit``.

Then, in fresh processes (one per mode, every function compiled once), each compile's time
with no cache and with the cache already holding every entry, after torch's one-time tracing
set-up (which a fresh process pays either way, printed apart). Times are of
``mlsdk.compiling.compile_to_directory`` (what ``Context.compile`` runs before loading the
program on the device). ``bench/bench_app.py`` prints these figures beside the
registered-parameter ones.

    PYTHONPATH=sdk:compiler:hdl python bench/bench_cache.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from mlsdk.cache import CacheOptions
from mlsdk.compiling import compile_to_directory
from mncore_compiler.capture import capture
from mncore_compiler.driver import CompileRequest, function_name

Tensors = dict[str, torch.Tensor]


def _compile_program(fn: Any, sample: Tensors, where: Path,
                     cache_options: CacheOptions | None) -> tuple[Any, Any]:
    """``mlsdk.compiling.compile_to_directory`` with the default request: (program, CacheResult)."""
    result = compile_to_directory(fn, sample, where, CompileRequest(name=function_name(fn)),
                             cache_options)
    return result.program, result.cache


def _functions() -> dict[str, tuple[Callable[[Tensors], Tensors], Tensors]]:
    torch.manual_seed(0)
    linear = torch.nn.Linear(1024, 1024)
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.GELU()]
    mlp = torch.nn.Sequential(*layers)

    def add(d: Tensors) -> Tensors:
        return {"out": d["x"] + d["y"]}

    def linear_1024(d: Tensors) -> Tensors:
        return {"y": linear(d["x"])}

    def mlp_8(d: Tensors) -> Tensors:
        return {"y": mlp(d["x"])}

    return {"add 64x64": (add, {"x": torch.ones(64, 64), "y": torch.ones(64, 64)}),
            "Linear(1024,1024)": (linear_1024, {"x": torch.ones(32, 1024)}),
            "MLP 8x256": (mlp_8, {"x": torch.ones(32, 256)})}


def _interleaved(actions: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median time of each action, run in turn ``repeat`` times (so that a change of machine
    load during the run affects every action alike)."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def in_process(work: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Per function, the median seconds of capture, no cache (``off``), miss and hit."""
    functions = _functions()
    fn, sample = functions["add 64x64"]
    capture(fn, sample)  # torch's one-time tracing set-up, outside every figure
    fresh = itertools.count()
    cache = CacheOptions(work / "cache")
    figures = {}
    for name, (fn, sample) in functions.items():

        def compiled(options: CacheOptions | None, fn: Any = fn, sample: Any = sample) -> str:
            return _compile_program(fn, sample, work / "out", options)[1].status

        compiled(cache)
        figures[name] = _interleaved({
            "capture": lambda fn=fn, sample=sample: capture(fn, sample),
            "off": lambda compiled=compiled: compiled(None),
            "miss": lambda compiled=compiled: compiled(CacheOptions(work / f"new{next(fresh)}")),
            "hit": lambda compiled=compiled: compiled(cache),
        }, repeat)
        if compiled(cache) != "hit":
            raise RuntimeError(f"{name}: the second compile into {cache.path} was not a hit")
    return figures


def child(work: Path, mode: str) -> None:
    """In this fresh process: torch's tracing set-up (a throw-away capture), then every
    function compiled once; print the seconds as JSON."""
    start = time.perf_counter()
    capture(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(2)})
    setup = time.perf_counter() - start
    cache = CacheOptions(work / "cache") if mode == "hit" else None
    times, statuses = {}, {}
    for name, (fn, sample) in _functions().items():
        start = time.perf_counter()
        _, result = _compile_program(fn, sample, work / f"out-{mode}", cache)
        times[name] = time.perf_counter() - start
        statuses[name] = result.status
    print(json.dumps({"setup": setup, "times": times, "statuses": statuses}))


def other_process(work: Path) -> dict[str, Any]:
    """Every function compiled in a fresh process with no cache and with the cache already
    holding it: ``{"setup": {mode: s}, "times": {name: {mode: s}}}``."""
    shutil.rmtree(work / "cache", ignore_errors=True)
    for fn, sample in _functions().values():  # fill the cache (in this process)
        _compile_program(fn, sample, work / "fill", CacheOptions(work / "cache"))
    results = {}
    for mode in ("off", "hit"):
        run = subprocess.run([sys.executable, __file__, "--child", mode, "--work", str(work)],
                             capture_output=True, text=True, check=True)
        results[mode] = json.loads(run.stdout.splitlines()[-1])
    if set(results["hit"]["statuses"].values()) != {"hit"}:
        raise RuntimeError(f"a fresh process missed the filled cache: {results['hit']}")
    return {"setup": {mode: r["setup"] for mode, r in results.items()},
            "times": {name: {mode: results[mode]["times"][name] for mode in results}
                      for name in results["off"]["times"]}}


def print_in_process(figures: dict[str, dict[str, float]], repeat: int) -> None:
    print(f"in this process (median of {repeat}, ms)")
    print(f"{'function':20} {'capture':>8} {'no cache':>9} {'miss':>8} {'hit':>8} {'saved':>8}")
    for name, t in figures.items():
        print(f"{name:20} {t['capture'] * 1e3:8.1f} {t['off'] * 1e3:9.1f} "
              f"{t['miss'] * 1e3:8.1f} {t['hit'] * 1e3:8.1f} {(t['off'] - t['hit']) * 1e3:8.1f}")


def print_other_process(figures: dict[str, Any]) -> None:
    setup = figures["setup"]
    print(f"in a fresh process, after torch's one-time tracing set-up ({setup['off'] * 1e3:.0f} "
          f"and {setup['hit'] * 1e3:.0f} ms), each function compiled once (ms)")
    print(f"{'function':20} {'no cache':>9} {'hit':>8} {'saved':>8}")
    for name, t in figures["times"].items():
        print(f"{name:20} {t['off'] * 1e3:9.1f} {t['hit'] * 1e3:8.1f} "
              f"{(t['off'] - t['hit']) * 1e3:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", choices=("off", "hit"), help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.work), args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench_cache_") as tmp:
        print_in_process(in_process(Path(tmp), args.repeat), args.repeat)
        print()
        print_other_process(other_process(Path(tmp)))


if __name__ == "__main__":
    main()
