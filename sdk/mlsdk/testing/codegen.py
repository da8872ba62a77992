"""Writers of a codegen directory killed at random points of their saves, for the test and the
bench that hold ``DeviceProgram.save`` to leaving the previous program loadable."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from mncore_compiler.program import DeviceProgram

__all__ = ["killed_saves"]


def _save_forever(program: DeviceProgram, directory: Path) -> None:
    while True:
        program.save(directory)


def killed_saves(programs: Sequence[DeviceProgram], target: Path, rounds: int,
                 seed: int) -> Iterator[int]:
    """Save ``programs[0]`` into ``target``, then per round start a child saving the next
    program (in turn) over and over, kill it with SIGKILL after a random 0-50 ms and yield the
    round: the caller loads ``target`` then and checks it holds one program whole."""
    rng = random.Random(seed)
    programs[0].save(target)
    for round_ in range(rounds):
        child = multiprocessing.get_context("fork").Process(
            target=_save_forever, args=(programs[round_ % len(programs)], target))
        child.start()
        time.sleep(rng.uniform(0.0, 0.05))
        if child.pid is not None:  # started, so always set; None only before start()
            os.kill(child.pid, signal.SIGKILL)
        child.join()
        yield round_
