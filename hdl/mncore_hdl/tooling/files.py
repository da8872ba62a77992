"""File mechanics every package shares: atomic replacement, hand-over by rename,
cross-process build locks, the names of temporaries and when one is stale, and canonical JSON.

Every writer in the kit that must never leave a half-written file (programs, Verilog, the
Verilator model's traced copy, back-door word files, waves) goes through :func:`atomic_output`
or :func:`atomic_write`; every build that two processes may start at once (Verilog export,
iverilog, Verilator, sweep points) holds a :func:`build_lock`. Temporaries are named
``.<name>.<pid>.<token>.tmp`` beside their target, so a later writer can tell one whose
process died (:func:`is_stale_temporary`) and remove it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "STALE_SECONDS",
    "atomic_output",
    "atomic_write",
    "build_lock",
    "canonical_json",
    "hand_over",
    "holding_lock",
    "is_stale_temporary",
    "temporary_path",
    "writer_alive",
]

# A temporary this old belongs to a writer that died, whatever its name says.
STALE_SECONDS = 3600.0

_TEMPORARY = re.compile(r"\..+\.(\d+)\.[^.]+\.tmp")


def temporary_path(target: Path) -> Path:
    """A fresh temporary name beside ``target``: ``.<name>.<pid>.<token>.tmp``."""
    target = Path(target)
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextlib.contextmanager
def atomic_output(target: Path, mode: int | None = 0o644) -> Iterator[Path]:
    """Yield a temporary path beside ``target`` for the caller to write; on a normal exit it
    is renamed over ``target`` (atomic on POSIX: readers see the old file or the new one,
    whole), on an exception it is removed and the exception propagates. ``mode`` sets the
    new file's permissions (None keeps what the writer made)."""
    target = Path(target)
    tmp = temporary_path(target)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(target: Path, data: bytes | str, mode: int | None = 0o644) -> None:
    """Write ``data`` (bytes, or text as UTF-8) to ``target`` through :func:`atomic_output`."""
    with atomic_output(target, mode) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)


def hand_over(source: Path, target: Path) -> None:
    """Move the finished file ``source`` to ``target`` (replacing it) in one rename: the
    back door hands its word files between the simulator and the host this way, with no copy.
    Both must be on one filesystem, as they are in a run folder."""
    os.replace(source, target)


@contextlib.contextmanager
def build_lock(lock_file: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created if needed) for the block: one
    builder at a time across processes. ``waiting`` is called once when another process
    holds the lock, before this one blocks on it."""
    with open(Path(lock_file), "a") as handle, holding_lock(handle.fileno(), waiting):
        yield


@contextlib.contextmanager
def holding_lock(fd: int, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the open file ``fd`` for the block (a file that is its
    own lock, such as a results file two sweeps append to); ``waiting`` as for
    :func:`build_lock`. The caller keeps and closes ``fd``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if waiting is not None:
            waiting()
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)


def writer_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def is_stale_temporary(path: Path, now: float | None = None) -> bool:
    """Whether ``path`` is a temporary (named by :func:`temporary_path`) whose writer died: its
    pid is gone, or it is older than :data:`STALE_SECONDS`. False for any other name."""
    path = Path(path)
    match = _TEMPORARY.fullmatch(path.name)
    if match is None:
        return False
    if not writer_alive(int(match.group(1))):
        return True
    try:
        age = (time.time() if now is None else now) - path.lstat().st_mtime
    except FileNotFoundError:
        return False
    return age > STALE_SECONDS


def canonical_json(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as JSON with sorted keys and no spaces: equal values give equal bytes, the
    form every content hash in the kit is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=default).encode()
