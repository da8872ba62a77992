"""Results that last: each point keyed by a content hash, stored one JSON line a point."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import stat
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..tooling.files import holding_lock
from ..tooling.verilog import design_digest
from . import adapter
from .spec import BACKENDS, Point

__all__ = ["kit_version", "point_key", "ResultStore", "ResultsError", "check_record",
           "MAX_RESULTS_BYTES", "STATUSES"]

#: The largest results file read back (a 100k-point sweep's records are well under this).
MAX_RESULTS_BYTES = 256 << 20
#: What a point's record may say of it.
STATUSES = ("ok", "error", "timeout")
_KEY = re.compile(r"[0-9a-f]{64}")


class ResultsError(ValueError):
    """A results file that cannot be used: a symlink, too large, or a record that is not
    what :meth:`ResultStore.add` writes (the message names the line and the field)."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_record(record: Any, where: str = "a record") -> None:
    """The consistency check of one point record, before a resumed sweep reuses it: ``key``
    a SHA-256 in hex, ``params`` an object, ``backend`` one of :data:`BACKENDS`, ``status``
    one of :data:`STATUSES`, ``figures`` an object of numbers (or null), ``error`` a string
    or null; a failure is a :class:`ResultsError` naming the field."""
    def fail(field: str, expected: str, found: Any) -> ResultsError:
        shown = repr(found)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return ResultsError(f"{where}: {field} must be {expected}, not {shown}; remove the "
                            "line (its point is run again) or the file")

    if not isinstance(record, dict):
        raise fail("the record", "a JSON object", record)
    for field in ("key", "params", "backend", "status", "figures"):
        if field not in record:
            raise ResultsError(f"{where}: the record has no {field!r} field; remove the "
                               "line (its point is run again) or the file")
    if not isinstance(record["key"], str) or not _KEY.fullmatch(record["key"]):
        raise fail("key", "a SHA-256 in hex (64 digits)", record["key"])
    if not isinstance(record["params"], dict):
        raise fail("params", "an object of parameter values", record["params"])
    if record["backend"] not in BACKENDS:
        raise fail("backend", f"one of {', '.join(BACKENDS)}", record["backend"])
    if record["status"] not in STATUSES:
        raise fail("status", f"one of {', '.join(STATUSES)}", record["status"])
    if not isinstance(record["figures"], dict):
        raise fail("figures", "an object of numbers", record["figures"])
    for name, value in record["figures"].items():
        if value is not None and not _number(value):
            raise fail(f"figures[{name!r}]", "a number or null", value)
    if record.get("error") is not None and not isinstance(record["error"], str):
        raise fail("error", "a string or null", record["error"])


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
        "design": [_digest(r) for r in roots],
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
    ``"error"`` or ``"timeout"``), ``figures`` and ``error``, checked by
    :func:`check_record` as it is read (a :class:`ResultsError` names the line). A line that
    does not parse (a run killed mid-write) is skipped and counted in :attr:`skipped`; the
    last record of a key wins. Appends take an exclusive lock and are one ``write`` each, so
    two sweeps on one file interleave whole lines. The file must not be a symlink, nor larger
    than :data:`MAX_RESULTS_BYTES`.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._records: dict[str, dict[str, Any]] = {}
        self.skipped = 0
        for number, line in enumerate(self._read_lines(), 1):
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                self.skipped += 1
                continue
            check_record(record, f"{self.path}:{number}")
            self._records[record["key"]] = record

    def _check_file(self) -> os.stat_result | None:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise ResultsError(f"The results file {str(self.path)!r} is not a regular file "
                               "(a symlink, a directory or a device); it would make the sweep "
                               "read or write elsewhere. Give --out a plain file")
        return info

    def _read_lines(self) -> list[str]:
        info = self._check_file()
        if info is None:
            return []
        if info.st_size > MAX_RESULTS_BYTES:
            raise ResultsError(f"The results file {str(self.path)!r} holds {info.st_size} "
                               f"bytes, more than {MAX_RESULTS_BYTES} (MAX_RESULTS_BYTES); it "
                               "is not a sweep's results file")
        with open(self.path, "rb") as f:
            raw = f.read(MAX_RESULTS_BYTES + 1)
        return raw.decode(errors="replace").splitlines()

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, if any."""
        return self._records.get(key)

    def add(self, record: dict[str, Any]) -> None:
        """Store one record (one line, flushed, so an interrupted sweep keeps what finished)."""
        check_record(record, "the record to store")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check_file()
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise ResultsError(f"Cannot append to the results file {str(self.path)!r}: "
                               f"{exc.strerror or exc}") from None
        try:
            with holding_lock(fd):  # another sweep on the same file waits its line
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # a killed writer's partial line stays on its own
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        self._records[record["key"]] = record

    def records(self, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every record, or those of ``keys`` in that order (missing keys left out)."""
        if keys is None:
            return list(self._records.values())
        return [self._records[k] for k in keys if k in self._records]
