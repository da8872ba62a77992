"""The compile cache's directory: entries written whole or not at all, and their eviction.

Layout of a cache directory::

    <path>/<key>/entry.json           format, version, key and what went into it
    <path>/<key>/program.json ...     the codegen directory (see mncore_compiler.program)
    <path>/.tmp-*                     entries being written or removed (renamed when whole)

An entry's last use is the modification time of its ``entry.json``: a store sets it, a hit
touches it, and :func:`prune` (or ``CacheOptions(max_bytes=...)`` after each store) removes the
entries used longest ago first. Entries are never modified in place otherwise, which is why a
codegen directory may share their files by hard links.

Nothing read from the directory is trusted: it must be the user's own and writable by no one
else (:class:`CacheError` otherwise); an entry is used only when every file of it is a plain
file or directory of the user's (never a symlink, checked with ``lstat``), only the files its
``program.json`` names are copied out, and its ``entry.json`` binds it to its key, to the
captured graph's hash and to the SHA-256 of its ``program.json`` (a swapped program is a miss).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mncore_compiler.program import DeviceProgram, codegen_files, replacing_program
from mncore_hdl.arch import ArchConfig
from mncore_hdl.tooling.files import STALE_SECONDS, atomic_output

from .errors import CodegenError

__all__ = ["CACHE_FORMAT", "CACHE_VERSION", "CacheDir", "CacheError", "CacheWarning",
           "PruneResult", "prune"]

logger = logging.getLogger("mlsdk.cache")

CACHE_FORMAT = "mncore-cosim-compile-cache"
CACHE_VERSION = 1
_ENTRY_FILE = "entry.json"
_TMP_PREFIX = ".tmp-"
#: Renames an installing writer tries while competitors replace a bad entry.
_INSTALL_ATTEMPTS = 10


class CacheError(CodegenError):
    """The compile cache directory cannot be used (it cannot be created or written, or it is
    another user's or writable by others)."""


class CacheWarning(UserWarning):
    """A cache entry was ignored (corrupt, truncated or foreign) and is being rebuilt."""


#: A program's inputs, in order: (name, type as text) pairs.
Inputs = tuple[tuple[str, str], ...]


class _BadEntry(Exception):
    """Why an entry cannot be used."""


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune` did.

    Attributes
    ----------
    removed : tuple of str
        The keys of the entries removed, the one used longest ago first.
    freed_bytes : int
        The bytes of the files of those entries.
    kept_bytes : int
        The bytes of the entries left in the cache.
    """

    removed: tuple[str, ...]
    freed_bytes: int
    kept_bytes: int


class CacheDir:
    """One cache directory: entries named by key, written whole or not at all."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def open(cls, root: Path) -> CacheDir:
        hint = ("; give CacheOptions a writable directory, or pass cache_options=None to "
                "compile without a cache")
        try:
            root.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                root.mkdir()
                os.chmod(root, 0o755)  # not the umask's: a group-writable cache is refused
            info = os.stat(root)
        except (OSError, ValueError, RecursionError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            if isinstance(exc, RecursionError):
                reason = f"it is {len(root.parts)} levels deep"
            raise CacheError(f"Cannot create the compile cache directory {str(root)!r}: "
                             f"{reason}{hint}") from None
        problem = _untrusted(info, "it")
        if problem:
            raise CacheError(f"Refusing the compile cache directory {str(root)!r}: {problem}; "
                             "another user could plant programs in it. Use a directory of "
                             f"your own that only you can write (chmod go-w){hint}")
        if not os.access(root, os.W_OK | os.X_OK):
            raise CacheError(f"The compile cache directory {str(root)!r} is not writable{hint}")
        return cls(root)

    def entry(self, key: str) -> Path:
        return self.root / key

    # -- reading ------------------------------------------------------------------------------

    def lookup(self, key: str, name: str, config: ArchConfig,
               graph: str | None = None, inputs: Inputs | None = None) -> DeviceProgram | None:
        """The entry's program, or None when absent or unusable (with a CacheWarning).
        ``graph`` is the captured graph's hash, which the entry must have been stored with,
        and ``inputs`` its inputs (name, type) in order, which the program must take.
        A hit marks the entry as just used (for :func:`prune`)."""
        path = self.entry(key)
        if not os.path.lexists(path):
            return None
        try:
            program = self._read(path, key, name, config, graph, inputs)
        except _BadEntry as exc:
            warnings.warn(f"Ignoring compile cache entry {str(path)!r}: {exc}; recompiling and "
                          "replacing it", CacheWarning, stacklevel=4)
            logger.warning("entry %s ignored: %s", path, exc)
            return None
        with contextlib.suppress(OSError):  # recency only; a read-only cache still hits
            os.utime(path / _ENTRY_FILE)
        return program

    def _read(self, path: Path, key: str, name: str, config: ArchConfig,
              graph: str | None = None, inputs: Inputs | None = None) -> DeviceProgram:
        try:
            program = self._read_checked(path, key, name, config, graph)
        except OSError as exc:  # a file named by the entry vanished or cannot be read
            raise _BadEntry(f"{exc.filename or path}: {exc.strerror or exc}") from None
        if inputs is not None and program_inputs(program) != inputs:
            raise _BadEntry(f"its program takes {program_inputs(program)}, not {inputs}")
        return program

    def _read_checked(self, path: Path, key: str, name: str, config: ArchConfig,
                      graph: str | None) -> DeviceProgram:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise _BadEntry("it is not a directory (a symlink, or not written by this cache)")
        _check_plain(path, "it")
        try:
            _check_plain(path / _ENTRY_FILE, f"its {_ENTRY_FILE}")
            meta = json.loads((path / _ENTRY_FILE).read_text())
        except FileNotFoundError:
            raise _BadEntry(f"it holds no {_ENTRY_FILE} (not written by this cache)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise _BadEntry(f"its {_ENTRY_FILE} is unreadable ({why})") from None
        _check_entry(meta, key, name, graph)
        files = codegen_files(path)
        if len(files) > 2:
            _check_plain(path / "constants", "its constants/")
        for rel in sorted(files):
            _check_plain(path / rel, f"its {rel}")
        if meta.get("program") != _file_sha256(path / "program.json"):
            raise _BadEntry(f"its program.json is not the one stored with its {_ENTRY_FILE}")
        try:
            program = DeviceProgram.load(path)
        except CodegenError as exc:
            raise _BadEntry(str(exc)) from None
        if program.name != name or program.arch != config:
            raise _BadEntry("its program is another function's or another chip's")
        return program

    # -- writing ------------------------------------------------------------------------------

    def store(self, key: str, program: DeviceProgram, name: str, config: ArchConfig,
              meta: dict[str, Any]) -> bool:
        """Write the entry under a temporary name, then rename it into place (atomic): a
        reader sees no entry or a whole one. A concurrent writer's whole entry is kept.
        ``meta`` is added to ``entry.json``. Return whether the entry is now in place."""
        self._sweep()
        tmp = self.root / f"{_TMP_PREFIX}{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            program.save(tmp)
            for folder in (tmp, tmp / "constants"):
                os.chmod(folder, 0o755)  # not the umask's: entries others can write are refused
            meta = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": key,
                    "name": name, **meta, "program": _file_sha256(tmp / "program.json"),
                    "created": time.time()}
            (tmp / _ENTRY_FILE).write_text(json.dumps(meta, indent=1) + "\n")
            os.chmod(tmp / _ENTRY_FILE, 0o644)
            self._install(tmp, key, name, config, meta.get("graph"), program_inputs(program))
            return True
        except (OSError, CodegenError) as exc:
            # The directory was writable when the compile began (CacheError otherwise); a
            # later failure (a full disk) costs the entry, not the compile.
            warnings.warn(f"Could not store compile cache entry {key[:16]}... in "
                          f"{str(self.root)!r}: {exc}", CacheWarning, stacklevel=4)
            return False
        finally:
            _remove(tmp)

    def _install(self, tmp: Path, key: str, name: str, config: ArchConfig,
                 graph: str | None, inputs: Inputs | None) -> None:
        path = self.entry(key)
        for _ in range(_INSTALL_ATTEMPTS):
            try:
                os.rename(tmp, path)
                return
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    raise
                if not os.path.lexists(path):
                    continue  # a competitor moved a bad entry aside meanwhile: try again
            try:
                self._read(path, key, name, config, graph, inputs)
                return  # another writer got there first with a whole entry: keep theirs
            except _BadEntry:
                pass
            self._discard(path)
        raise OSError(f"entry {str(path)!r} kept changing while being replaced")

    def _discard(self, path: Path) -> bool:
        """Move ``path`` aside in one rename (readers see the entry whole or not at all), then
        delete it. False when it was gone already (a competitor took it)."""
        trash = self.root / f"{_TMP_PREFIX}gone-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return False
        _remove(trash)
        return True

    def _sweep(self) -> None:
        """Remove temporaries of writers that died (older than an hour)."""
        limit = time.time() - STALE_SECONDS
        with contextlib.suppress(OSError), os.scandir(self.root) as entries:
            for item in entries:
                if item.name.startswith(_TMP_PREFIX) and item.stat().st_mtime < limit:
                    _remove(Path(item.path))

    # -- eviction -----------------------------------------------------------------------------

    def prune(self, max_bytes: int, keep: str | None = None) -> PruneResult:
        """Remove the entries used longest ago until the entries' files add up to at most
        ``max_bytes``; the entry ``keep`` (just stored) is never removed."""
        entries = []
        with os.scandir(self.root) as items:
            for item in items:
                if item.name.startswith(".") or not item.is_dir(follow_symlinks=False):
                    continue
                used = _last_use(Path(item.path))
                if used is not None:
                    entries.append((used, item.name, _size(Path(item.path))))
        total = sum(size for _, _, size in entries)
        removed, freed = [], 0
        for _, key, size in sorted(entries):
            if total - freed <= max_bytes:
                break
            if key == keep:
                continue
            if self._discard(self.entry(key)):
                removed.append(key)
            freed += size  # gone either way (a competing pruner took it)
        if removed:
            logger.info("pruned %d entries (%d bytes) from %s", len(removed), freed, self.root)
        return PruneResult(tuple(removed), freed, total - freed)

    # -- the codegen directory ----------------------------------------------------------------

    def materialise(self, key: str, program: DeviceProgram, codegen_dir: Path) -> None:
        """Fill ``codegen_dir`` from the entry (hard links, else copies; program.json last),
        or write ``program`` there when the entry is gone (removed by someone else). Only the
        files the entry's program.json names are placed, never through a symlink."""
        source = self.entry(key)
        files = sorted(codegen_files(source), key=lambda rel: (rel == "program.json", rel))
        try:
            if len(files) > 2:
                _check_plain(source / "constants", "constants/")
            with replacing_program(codegen_dir) as written:
                for rel in files:
                    _check_plain(source / rel, rel)
                    _place(source / rel, codegen_dir / rel)
                    written.add(rel)
        except _BadEntry:
            program.save(codegen_dir)
            return
        except FileNotFoundError as exc:
            if exc.filename is not None and Path(exc.filename).is_relative_to(source):
                program.save(codegen_dir)
                return
            raise _codegen_error(codegen_dir, exc) from None
        except OSError as exc:
            raise _codegen_error(codegen_dir, exc) from None
        if not files:
            program.save(codegen_dir)


def prune(path: str | os.PathLike[str], max_bytes: int) -> PruneResult:
    """Shrink a compile cache directory to at most ``max_bytes`` of entries.

    The entries used longest ago (stored, or last hit) go first. Safe while other processes
    compile with the same cache: an entry disappears in one rename, and a compile that was
    about to use it compiles again instead (a miss).

    Parameters
    ----------
    path : str or path-like
        The cache directory (``CacheOptions.path``); a ``storage.path`` is accepted.
    max_bytes : int
        The bound, in bytes (0 empties the cache).

    Returns
    -------
    PruneResult
        The removed keys and the bytes freed and kept.

    Raises
    ------
    TypeError, ValueError
        When ``max_bytes`` is not a non-negative int.
    FileNotFoundError
        When ``path`` is not an existing directory.
    """
    check_max_bytes(max_bytes, "prune max_bytes")
    root = Path(os.fspath(path)).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"No compile cache directory at {str(root)!r}")
    return CacheDir(root).prune(max_bytes)


def check_max_bytes(value: Any, what: str) -> None:
    """Raise unless ``value`` is a non-negative int (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int number of bytes, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0 bytes, not {value}")


def program_inputs(program: DeviceProgram) -> Inputs:
    """The inputs a program takes, in order: (name, type as text) pairs."""
    types = program.graph.inputs
    return tuple((name, str(types[name]) if name in types else "?") for name in program.inputs)


#: The fields of an entry.json and their JSON types (``created``: seconds since the epoch).
_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": str, "version": int, "key": str, "name": str, "kit": dict, "graph": str,
    "program": str, "created": (int, float)}
#: Fields a store may leave out (``CacheDir.store`` with no such ``meta``).
_ENTRY_OPTIONAL = ("kit", "graph")


def _check_entry(meta: Any, key: str, name: str, graph: str | None) -> None:
    """The consistency check of an ``entry.json``, before anything else of the entry is read:
    every field present with its type, and bound to this key, function and graph."""
    if (not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT
            or meta.get("version") != CACHE_VERSION):
        raise _BadEntry(f"its {_ENTRY_FILE} is not a {CACHE_FORMAT} v{CACHE_VERSION} entry")
    for field, kind in _ENTRY_FIELDS.items():
        value = meta.get(field)
        if field in _ENTRY_OPTIONAL and field not in meta:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _BadEntry(f"its {_ENTRY_FILE} field {field!r} must be a JSON "
                            f"{getattr(kind, '__name__', 'number')}, not {str(value)[:40]!r}")
    if meta["key"] != key:
        raise _BadEntry(f"it was stored under another key ({meta['key'][:16]}...)")
    if meta["name"] != name:
        raise _BadEntry(f"it was stored for function {meta['name'][:40]!r}, not {name!r}")
    if graph is not None and meta.get("graph") != graph:
        raise _BadEntry("it was stored for another captured graph")


def _untrusted(info: os.stat_result, what: str) -> str | None:
    """Why a file or directory with this ``lstat`` is not the user's alone, or None."""
    if info.st_uid != os.geteuid():
        return f"{what} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
    if info.st_mode & 0o022:
        return f"{what} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _check_plain(path: Path, what: str) -> None:
    """Raise _BadEntry unless ``path`` is a plain file or directory (a symlink is not) that
    only the user can write; FileNotFoundError when it is absent."""
    info = os.lstat(path)
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise _BadEntry(f"{what} is not a plain file or directory (a symlink?)")
    problem = _untrusted(info, what)
    if problem:
        raise _BadEntry(problem)


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _last_use(entry: Path) -> float | None:
    """When the entry was stored or last hit; None for what is not a whole entry."""
    try:
        return (entry / _ENTRY_FILE).stat().st_mtime
    except OSError:
        return None


def _size(entry: Path) -> int:
    total = 0
    for file in entry.rglob("*"):
        with contextlib.suppress(OSError):
            info = file.lstat()  # a planted symlink counts as itself, not as its target
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _place(source: Path, target: Path) -> None:
    """Put ``source``'s bytes at ``target`` through a temporary name and a rename."""
    with contextlib.suppress(OSError):
        if os.path.samefile(source, target):
            return  # already linked by an earlier hit
    target.parent.mkdir(parents=True, exist_ok=True)
    # atomic_output removes tmp when the rename fails, or does nothing (target was already a
    # link to the same file: rename(2) then leaves tmp in place).
    with atomic_output(target, mode=None) as tmp:
        try:
            os.link(source, tmp)  # entries are never modified in place, so sharing is safe
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not source.exists():
                raise
            shutil.copyfile(source, tmp)


def _codegen_error(codegen_dir: Path, exc: OSError) -> CodegenError:
    where = exc.filename if exc.filename is not None else codegen_dir
    return CodegenError(f"Cannot write the codegen directory {str(codegen_dir)!r}: {where}: "
                        f"{exc.strerror or exc}; choose a writable directory")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
