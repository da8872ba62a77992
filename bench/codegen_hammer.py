"""Codegen directories under load: a reader loading while another process recompiles, and kills.

The long version of ``tests/sdk/test_compiling_atomic.py`` (issue 22, item 4): one process saves
two programs (different constants) into one codegen directory ``--recompiles`` times in turn,
while this one loads it as fast as it can; every load must succeed and hold one program whole.
Then ``--kills`` writers are killed with SIGKILL at random points of their saves; after each,
the directory must still load. Prints the counts; exits 1 on any failure.

    ./exec_with_env.sh python bench/codegen_hammer.py --recompiles 1000 --kills 200 --seed 22
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import torch
from mlsdk import CodegenError, Context, MNDevice, storage
from mlsdk.testing.codegen import killed_saves
from mncore_compiler.program import DeviceProgram

WEIGHTS = {"a": torch.linspace(-1.0, 1.0, 4096), "b": torch.linspace(2.0, 3.0, 4096)}


def _build(root: Path) -> dict[str, DeviceProgram]:
    context = Context(MNDevice("mncore2:auto"))
    programs = {}
    try:
        for which, weight in WEIGHTS.items():
            def scale(inputs, weight=weight):
                return {"out": inputs["x"] * weight}
            out = storage.path(root) / f"build-{which}"
            context.compile(scale, {"x": torch.randn(4, 4096)}, out)
            programs[which] = DeviceProgram.load(out.path)
    finally:
        context.close()
    return programs


def _which(program: DeviceProgram) -> str | None:
    (constant,) = program.graph.constants.values()
    matches = [k for k, w in WEIGHTS.items() if torch.equal(constant, w)]
    return matches[0] if len(matches) == 1 else None


def _recompile(programs: dict[str, DeviceProgram], directory: Path, count: int) -> None:
    for i in range(count):
        programs["ab"[i % 2]].save(directory)


def _save_forever(program: DeviceProgram, directory: Path) -> None:
    while True:
        program.save(directory)


def hammer(programs: dict[str, DeviceProgram], target: Path, recompiles: int) -> int:
    """Loads during ``recompiles`` saves; returns the failures (printed)."""
    programs["a"].save(target)
    writer = multiprocessing.get_context("fork").Process(
        target=_recompile, args=(programs, target, recompiles))
    start = time.perf_counter()
    writer.start()
    loads = failures = 0
    while writer.is_alive():
        try:
            ok = _which(DeviceProgram.load(target)) is not None
        except CodegenError as exc:
            ok = False
            print(f"  load failed: {exc}")
        loads += 1
        failures += not ok
    writer.join()
    failures += writer.exitcode != 0
    print(f"hammer: {recompiles} recompiles, {loads} concurrent loads, {failures} failures "
          f"({time.perf_counter() - start:.1f} s)")
    return failures


def kills(programs: dict[str, DeviceProgram], target: Path, count: int, seed: int) -> int:
    """``count`` writers killed at random points; returns the rounds that lost the program."""
    failures = 0
    for round_ in killed_saves([programs["a"], programs["b"]], target, count, seed):
        try:
            if _which(DeviceProgram.load(target)) is None:
                raise CodegenError("a mixed program")
        except CodegenError as exc:
            failures += 1
            print(f"  round {round_} (seed {seed}): {exc}")
    programs["a"].save(target)
    left = [p.name for p in target.rglob("*.tmp")]
    print(f"kills: {count} writers killed, {failures} lost programs, {len(left)} temporaries "
          "left after the next save")
    return failures + len(left)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recompiles", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="codegen-hammer-") as tmp:
        root = Path(tmp)
        programs = _build(root)
        failures = hammer(programs, root / "shared", args.recompiles)
        failures += kills(programs, root / "victim", args.kills, args.seed)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
