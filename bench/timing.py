"""Wall-clock timing shared by the benches: the best of several runs.

The machines these benches run on are shared: a mean measures the neighbours too, so each
bench reports the least disturbed run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["best_of"]


def best_of(fn: Callable[[], object], repeat: int, *, budget_s: float | None = None,
            warmup: bool = True) -> float:
    """Seconds of the fastest of up to ``repeat`` calls of ``fn``.

    ``warmup`` makes one untimed call first (caches, lazy builds). With ``budget_s``, the
    loop stops early once the timed calls together took longer than that (at least one call
    is always timed).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    if warmup:
        fn()
    best, spent = float("inf"), 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
        if budget_s is not None and spent > budget_s:
            break
    return best
