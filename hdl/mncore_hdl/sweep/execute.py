"""Running a sweep's points: in this process, or each as a task on a local or remote Ray cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import adapter
from .spec import Point, SweepSpec
from .store import ResultStore, point_key

__all__ = ["PointTimeout", "deadline", "run_point", "run_sweep", "SweepResult", "ray_available"]


class PointTimeout(Exception):
    """A point ran past the sweep's ``timeout_s``."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`PointTimeout` in the body after ``seconds`` (SIGALRM: main thread only,
    which is where this process and a Ray worker run a point; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise PointTimeout(f"point ran past its {seconds} s timeout")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _figures(point: Point, key: str) -> dict[str, Any]:
    if point.backend == "model":
        figures = adapter.model_figures(point.config, point.workload)
    else:
        figures = adapter.rtl_figures(point.config, point.workload, point.backend,
                                      name=f"sweep-{key[:16]}")
    figures["area_bits"] = adapter.area_bits(point.config, point.workload)
    return figures


def _record(point: Point, key: str, status: str, figures: dict[str, Any],
            error: str | None) -> dict[str, Any]:
    return {"key": key, "params": point.params, "backend": point.backend, "status": status,
            "figures": figures, "error": error, "host": os.uname().nodename}


def run_point(point: Point, key: str, timeout_s: float | None = None) -> dict[str, Any]:
    """Run one point and return its record; a failure or timeout is recorded, never raised."""
    t0 = time.perf_counter()
    figures: dict[str, Any] = {}
    status, error = "ok", None
    try:
        with deadline(timeout_s):
            figures = _figures(point, key)
    except PointTimeout as exc:
        status, error = "timeout", str(exc)
    except Exception as exc:  # one point's failure must not end the sweep
        status, error = "error", f"{type(exc).__name__}: {exc}"
    figures["wall_s"] = time.perf_counter() - t0
    return _record(point, key, status, figures, error)


def ray_available() -> bool:
    """Whether ``ray`` is installed (the ``[ray]`` extra)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _in_process(todo: Sequence[tuple[Point, str]],
                timeout_s: float | None) -> Iterator[dict[str, Any]]:
    for point, key in todo:
        yield run_point(point, key, timeout_s)


def _on_ray(todo: Sequence[tuple[Point, str]], timeout_s: float | None,
            address: str | None) -> Iterator[dict[str, Any]]:
    """Each point a Ray task of one CPU; records as tasks finish (in any order)."""
    if not ray_available():
        raise RuntimeError("Running a sweep on Ray needs the ray package; install it with: "
                           "pip install -e '.[ray]'")
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # this machine reaches no network
    started = not ray.is_initialized()
    if started:
        # A local cluster keeps its object store small: points exchange a few hundred bytes.
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 object_store_memory=None if address else 256 << 20)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_point)
        refs = {task.remote(point, key, timeout_s): (point, key) for point, key in todo}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                point, key = refs[ref]
                try:
                    yield ray.get(ref)
                except Exception as exc:  # the worker died (a crash, out of memory)
                    yield _record(point, key, "error", {}, f"{type(exc).__name__}: {exc}")
    finally:
        if started:
            ray.shutdown()


@dataclass
class SweepResult:
    """A finished sweep: every point's record in point order, and how many were run now."""

    spec: SweepSpec
    records: list[dict[str, Any]]
    computed: int
    reused: int
    wall_s: float
    failed: list[dict[str, Any]] = field(default_factory=list)


def _progress(total: int, enabled: bool) -> Any:
    if enabled:
        try:
            from tqdm import tqdm

            return tqdm(total=total, unit="point", dynamic_ncols=True)
        except ModuleNotFoundError:
            pass
    return None


def run_sweep(spec: SweepSpec, store: ResultStore, *, ray: bool = False,
              address: str | None = None, retry_failed: bool = False,
              progress: bool = True) -> SweepResult:
    """Run every point of ``spec`` not already in ``store``, and return all their records.

    Parameters
    ----------
    spec : SweepSpec
        What to run.
    store : ResultStore
        Where records are read (a point whose key is stored is reused, not run) and written.
    ray : bool
        Run the points as Ray tasks on a local cluster started here (or the one this process
        already joined).
    address : str, optional
        Join the Ray cluster at this address instead (implies ``ray``).
    retry_failed : bool
        Run again the points whose stored record is an error or a timeout.
    progress : bool
        Show a progress bar (tqdm) of the points being run.
    """
    t0 = time.perf_counter()
    points = spec.points()
    keys = [point_key(p) for p in points]
    todo = []
    for point, key in zip(points, keys, strict=True):
        old = store.get(key)
        if old is None or (retry_failed and old["status"] != "ok"):
            todo.append((point, key))
    # Nothing to run starts no cluster: a repeated sweep costs only reading its results.
    run = _on_ray(todo, spec.timeout_s, address) if (ray or address) and todo \
        else _in_process(todo, spec.timeout_s)
    bar = _progress(len(todo), progress and bool(todo))
    for record in run:
        store.add(record)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    records = store.records(keys)
    return SweepResult(spec, records, computed=len(todo), reused=len(points) - len(todo),
                       wall_s=time.perf_counter() - t0,
                       failed=[r for r in records if r["status"] != "ok"])
