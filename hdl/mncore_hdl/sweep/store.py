"""Results that last: each point keyed by a content hash, stored one JSON line a point."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..tooling.verilog import design_digest
from . import adapter
from .spec import Point

__all__ = ["kit_version", "point_key", "ResultStore"]


@lru_cache(maxsize=1)
def kit_version() -> str:
    """The installed kit's version (``mncore-cosim``), or ``unknown`` from a bare checkout."""
    try:
        return importlib.metadata.version("mncore-cosim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@lru_cache(maxsize=64)
def _digest(root: Any) -> str:
    return design_digest(root)


def point_key(point: Point) -> str:
    """Content hash of what decides a point's figures: design sources, config, workload,
    backend and kit version. Equal keys mean a stored result can stand for a new run."""
    roots = adapter.design_roots(point.workload, point.backend)
    identity = {
        "design": [_digest(r) for r in roots]
        + [hashlib.sha256(p.read_bytes()).hexdigest() for p in adapter.bench_sources(
            point.workload, point.backend)],
        "config": point.config.to_dict(),
        "workload": point.workload.to_dict(),
        "backend": point.backend,
        "kit": kit_version(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


class ResultStore:
    """Point records in a JSON-lines file: appended as points finish, read back to resume.

    Parameters
    ----------
    path : path-like
        The ``.jsonl`` file (created with its folder on the first record).

    A record is a dict with ``key``, ``params``, ``backend``, ``status`` (``"ok"``,
    ``"error"`` or ``"timeout"``), ``figures`` and ``error``. A line that does not parse (a run
    killed mid-write) is skipped; the last record of a key wins.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._records: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and "key" in record:
                    self._records[record["key"]] = record

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, if any."""
        return self._records.get(key)

    def add(self, record: dict[str, Any]) -> None:
        """Store one record (one line, flushed, so an interrupted sweep keeps what finished)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
        self._records[record["key"]] = record

    def records(self, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every record, or those of ``keys`` in that order (missing keys left out)."""
        if keys is None:
            return list(self._records.values())
        return [self._records[k] for k in keys if k in self._records]
