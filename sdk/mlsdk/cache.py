"""The compile cache: ``Context.compile(..., cache_options=CacheOptions(path))``.

A cache entry is one compiled device program, stored under a key that hashes everything that
decides it: the captured graph (its canonical JSON and every constant's bits), the sample
inputs' names, shapes and dtypes, the program name, the compile options, the
``io_spec_constraints`` layouts, the architecture config, and the kit version (``mlsdk``'s
version, the program format, and a hash of the compiler's and the layout library's sources).
The function is always captured (traced) first, since the key is its graph; a hit skips the pass
pipeline and the writing of the program, and fills the codegen directory from the entry.

Layout of a cache directory::

    <path>/<key>/entry.json           format, version, key and what went into it
    <path>/<key>/program.json ...     the codegen directory (see mncore_compiler.program)
    <path>/.tmp-*                     entries being written (renamed into place when whole)

See ``docs/cache.md`` for what each ``enable_*`` flag controls and how errors are handled.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mncore_compiler.driver import capture_step, compile_graph, function_name
from mncore_compiler.functionalize import OptimizerRecord
from mncore_compiler.ir import Graph
from mncore_compiler.program import PROGRAM_FORMAT, PROGRAM_VERSION, DeviceProgram
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import Layout, to_bits

from .errors import CodegenError

__all__ = ["CacheError", "CacheOptions", "CacheResult", "CacheWarning", "cache_key",
           "compile_program", "kit_version"]

#: The logger that says hit, miss or off for every compile (INFO) and why an entry was dropped.
logger = logging.getLogger("mlsdk.cache")

CACHE_FORMAT = "mncore-cosim-compile-cache"
CACHE_VERSION = 1
_ENTRY_FILE = "entry.json"
_TMP_PREFIX = ".tmp-"
_STALE_SECONDS = 3600.0  # a temporary entry this old belongs to a writer that died
#: Renames an installing writer tries while competitors replace a bad entry.
_INSTALL_ATTEMPTS = 10
# torch's make_fx is not thread-safe: captures from two threads at once corrupt its state.
_CAPTURE_LOCK = threading.Lock()
_FLAGS = ("enable_app_cache", "enable_onnx_cache", "enable_codegen_cache",
          "enable_gpfn2obj_cache")


class CacheError(CodegenError):
    """The compile cache directory cannot be used (it cannot be created or written)."""


class CacheWarning(UserWarning):
    """A cache entry was ignored (corrupt, truncated or foreign) and is being rebuilt."""


@dataclass(frozen=True)
class CacheOptions:
    """Where and what to cache when compiling (MLSDK's ``CacheOptions``).

    Parameters
    ----------
    path : str or path-like
        The cache directory (created if needed; a ``storage.path`` is accepted). Several
        processes may share it.
    enable_app_cache : bool
        The compiled-program cache as a whole: lookups and stores. False turns the cache off.
    enable_onnx_cache : bool
        Accepted for MLSDK compatibility; this kit has no ONNX stage, so it has no effect.
    enable_codegen_cache : bool
        The program the pass pipeline generates (the codegen directory's content), which is
        what an entry holds in this kit: False turns the cache off as well.
    enable_gpfn2obj_cache : bool
        Accepted for MLSDK compatibility; this kit has no assembler stage, so it has no effect.
    """

    path: str | os.PathLike[str]
    enable_app_cache: bool = True
    enable_onnx_cache: bool = True
    enable_codegen_cache: bool = True
    enable_gpfn2obj_cache: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
            raise TypeError("CacheOptions path must be a non-empty str or path-like (e.g. "
                            f"storage.path(...)), not {self.path!r}")
        for flag in _FLAGS:
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise TypeError(f"CacheOptions {flag} must be a bool, not {value!r}")

    @property
    def root(self) -> Path:
        """The cache directory as a Path."""
        return Path(os.fspath(self.path)).expanduser()

    @property
    def enabled(self) -> bool:
        """Whether compiles look up and store programs (app and codegen caches both on)."""
        return self.enable_app_cache and self.enable_codegen_cache


@dataclass(frozen=True)
class CacheResult:
    """What the cache did for one compile.

    Attributes
    ----------
    status : str
        ``"hit"`` (program read from the cache), ``"miss"`` (compiled and stored) or
        ``"off"`` (no cache options, or the cache disabled by them).
    key : str or None
        The entry's key (64 hex digits), None when off.
    entry : Path or None
        The entry directory, None when off.
    seconds : float
        Wall time of the compile, capture included.
    optimizers : tuple of OptimizerRecord
        The torch optimizers the captured function closes over, with their parameter lists
        as captured (a training step checks them at each call).
    """

    status: str
    key: str | None = None
    entry: Path | None = None
    seconds: float = 0.0
    optimizers: tuple[OptimizerRecord, ...] = ()


def compile_program(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
                    codegen_dir: Path, cache_options: CacheOptions | None, *,
                    float_dtype: str = "float32", constraints: Mapping[str, Layout] | None = None,
                    config: ArchConfig, options: Mapping[str, Any] | None = None,
                    registered: Mapping[int, str] | None = None,
                    training: bool | None = None,
                    ) -> tuple[DeviceProgram, CacheResult]:
    """Compile ``fn`` into ``codegen_dir``, through the cache when ``cache_options`` enables it.

    Raises
    ------
    TypeError
        When ``cache_options`` is not a CacheOptions.
    CacheError
        When the cache directory cannot be created or written (checked before compiling).
    """
    start = time.perf_counter()
    if cache_options is not None and not isinstance(cache_options, CacheOptions):
        raise TypeError("cache_options must be a CacheOptions(path, ...) or None, not "
                        f"{type(cache_options).__name__}")
    constraints = dict(constraints or {})
    options = dict(options or {})
    name = function_name(fn)
    store = _Store.open(cache_options.root) if cache_options and cache_options.enabled else None
    with _one_torch_thread():
        program, status, key, optimizers = _compile(
            fn, sample_inputs, codegen_dir, store, name=name, float_dtype=float_dtype,
            constraints=constraints, config=config, options=options, registered=registered,
            training=training)
    if store is None or key is None:
        result = CacheResult(status, seconds=time.perf_counter() - start,
                             optimizers=optimizers)
        logger.info("compile %s: cache off (%.3f s)", name, result.seconds)
        return program, result
    result = CacheResult(status, key, store.entry(key), time.perf_counter() - start,
                         optimizers)
    logger.info("compile %s: cache %s, key %s (%.3f s)", name, status, key[:16], result.seconds)
    return program, result


def _compile(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
             codegen_dir: Path, store: _Store | None, *, name: str, float_dtype: str,
             constraints: dict[str, Layout], config: ArchConfig, options: dict[str, Any],
             registered: Mapping[int, str] | None, training: bool | None,
             ) -> tuple[DeviceProgram, str, str | None, tuple[OptimizerRecord, ...]]:
    """Capture, then compile or read the entry; return the program, the status, the key
    (None when the cache is off) and the optimizers the function steps."""
    with _CAPTURE_LOCK:
        captured = capture_step(fn, sample_inputs, float_dtype=float_dtype,
                                registered=registered, training=training)
    graph, state, writes = captured.graph, captured.state, captured.state_writes
    optimizers = tuple(captured.optimizers)
    if store is None:
        program = compile_graph(graph, constraints=constraints, config=config, options=options,
                                name=name, float_dtype=float_dtype, state=state,
                                state_writes=writes)
        program.save(codegen_dir)
        return program, "off", None, optimizers
    key = cache_key(graph, name=name, float_dtype=float_dtype, options=options,
                    constraints=constraints, config=config, state=state, state_writes=writes)
    found = store.lookup(key, name, config)
    status = "hit" if found is not None else "miss"
    if found is not None:
        program, in_place = found, True
    else:
        program = compile_graph(graph, constraints=constraints, config=config, options=options,
                                name=name, float_dtype=float_dtype, state=state,
                                state_writes=writes)
        in_place = store.store(key, program, name, config)
    if in_place:
        store.materialise(key, program, codegen_dir)
    else:
        program.save(codegen_dir)
    return program, status, key, optimizers


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch's CPU kernels on one thread while tracing.

    Tracing computes on the sample values only to follow the function (its results are thrown
    away), and those ops are small: split over threads, each one waits at a barrier for every
    thread, and when another process holds a core that wait is a scheduler time slice (measured
    on a loaded 2-core machine: a 256x256 clone 8 ms on two threads, 0.02 ms on one; tracing an
    8-layer MLP 195 ms against 30 ms). The thread count is process-wide, so it is restored at
    once; torch work of other threads meanwhile runs on one thread (slower, never different).
    """
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# -- the key ------------------------------------------------------------------------------------


def cache_key(graph: Graph, *, name: str, float_dtype: str, options: Mapping[str, Any],
              constraints: Mapping[str, Layout], config: ArchConfig,
              state: Mapping[str, str] | None = None,
              state_writes: Mapping[str, str] | None = None) -> str:
    """The hex SHA-256 naming the entry of a compile: any change of an argument changes it."""
    digest = hashlib.sha256()

    def part(label: str, value: Any) -> None:
        digest.update(label.encode() + b"\0" + _canonical(value) + b"\0")

    part("format", [CACHE_FORMAT, CACHE_VERSION])
    part("kit", kit_version())
    part("name", name)
    part("inputs", [[n, list(t.shape), t.dtype] for n, t in graph.inputs.items()])
    part("graph", graph.to_json())
    for cname, tensor in graph.constants.items():
        bits = np.ascontiguousarray(to_bits(tensor))
        part("constant", [cname, list(tensor.shape), str(tensor.dtype), str(bits.dtype)])
        digest.update(bits.data)
    part("float_dtype", float_dtype)
    part("options", options)
    part("constraints", {n: [str(layout), layout.dtype] for n, layout in constraints.items()})
    part("arch", config.to_dict())
    part("state", dict(state or {}))  # which constants are registered module state
    if state_writes:  # which registered tensors a training step updates, from which output
        part("state_writes", dict(state_writes))
    return digest.hexdigest()


@cache
def kit_version() -> dict[str, str]:
    """What identifies this kit's compiler in a key: a changed compiler is never served a
    program an older one produced.

    ``mlsdk`` is the package version, ``program`` the codegen format, and ``sources`` a hash of
    every source file of ``mncore_compiler`` and of the layout library and architecture
    description it uses.
    """
    import mncore_compiler
    import mncore_hdl.arch
    import mncore_hdl.layout

    from . import __version__

    files = [*sorted(Path(mncore_compiler.__file__).parent.rglob("*.py")),
             *sorted(Path(mncore_hdl.layout.__file__).parent.rglob("*.py")),
             Path(mncore_hdl.arch.__file__)]
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.parent.name}/{file.name}".encode() + b"\0")
        digest.update(file.read_bytes())
    return {"mlsdk": __version__, "program": f"{PROGRAM_FORMAT}/{PROGRAM_VERSION}",
            "sources": digest.hexdigest()}


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr).encode()


# -- the directory ------------------------------------------------------------------------------


class _BadEntry(Exception):
    """Why an entry cannot be used."""


class _Store:
    """One cache directory: entries named by key, written whole or not at all."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def open(cls, root: Path) -> _Store:
        hint = ("; give CacheOptions a writable directory, or pass cache_options=None to "
                "compile without a cache")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"Cannot create the compile cache directory {str(root)!r}: "
                             f"{exc.strerror or exc}{hint}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise CacheError(f"The compile cache directory {str(root)!r} is not writable{hint}")
        return cls(root)

    def entry(self, key: str) -> Path:
        return self.root / key

    # -- reading ------------------------------------------------------------------------------

    def lookup(self, key: str, name: str, config: ArchConfig) -> DeviceProgram | None:
        """The entry's program, or None when absent or unusable (with a CacheWarning)."""
        path = self.entry(key)
        if not os.path.lexists(path):
            return None
        try:
            return self._read(path, key, name, config)
        except _BadEntry as exc:
            warnings.warn(f"Ignoring compile cache entry {str(path)!r}: {exc}; recompiling and "
                          "replacing it", CacheWarning, stacklevel=4)
            logger.warning("entry %s ignored: %s", path, exc)
            return None

    def _read(self, path: Path, key: str, name: str, config: ArchConfig) -> DeviceProgram:
        if not path.is_dir():
            raise _BadEntry("it is not a directory (not written by this cache)")
        try:
            meta = json.loads((path / _ENTRY_FILE).read_text())
        except FileNotFoundError:
            raise _BadEntry(f"it holds no {_ENTRY_FILE} (not written by this cache)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _BadEntry(f"its {_ENTRY_FILE} is unreadable ({exc})") from None
        if (not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT
                or meta.get("version") != CACHE_VERSION):
            raise _BadEntry(f"its {_ENTRY_FILE} is not a {CACHE_FORMAT} v{CACHE_VERSION} entry")
        if meta.get("key") != key:
            raise _BadEntry(f"it was stored under another key ({str(meta.get('key'))[:16]}...)")
        try:
            program = DeviceProgram.load(path)
        except CodegenError as exc:
            raise _BadEntry(str(exc)) from None
        if program.name != name or program.arch != config:
            raise _BadEntry("its program is another function's or another chip's")
        return program

    # -- writing ------------------------------------------------------------------------------

    def store(self, key: str, program: DeviceProgram, name: str, config: ArchConfig) -> bool:
        """Write the entry under a temporary name, then rename it into place (atomic): a
        reader sees no entry or a whole one. A concurrent writer's whole entry is kept.
        Return whether the entry is now in place."""
        self._sweep()
        tmp = self.root / f"{_TMP_PREFIX}{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            program.save(tmp)
            meta = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": key,
                    "name": name, "kit": kit_version(), "created": time.time()}
            (tmp / _ENTRY_FILE).write_text(json.dumps(meta, indent=1) + "\n")
            self._install(tmp, key, name, config)
            return True
        except (OSError, CodegenError) as exc:
            # The directory was writable when the compile began (CacheError otherwise); a
            # later failure (a full disk) costs the entry, not the compile.
            warnings.warn(f"Could not store compile cache entry {key[:16]}... in "
                          f"{str(self.root)!r}: {exc}", CacheWarning, stacklevel=4)
            return False
        finally:
            _remove(tmp)

    def _install(self, tmp: Path, key: str, name: str, config: ArchConfig) -> None:
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
                self._read(path, key, name, config)
                return  # another writer got there first with a whole entry: keep theirs
            except _BadEntry:
                pass
            trash = self.root / f"{_TMP_PREFIX}bad-{uuid.uuid4().hex[:8]}"
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, trash)
            _remove(trash)
        raise OSError(f"entry {str(path)!r} kept changing while being replaced")

    def _sweep(self) -> None:
        """Remove temporaries of writers that died (older than an hour)."""
        limit = time.time() - _STALE_SECONDS
        with contextlib.suppress(OSError), os.scandir(self.root) as entries:
            for item in entries:
                if item.name.startswith(_TMP_PREFIX) and item.stat().st_mtime < limit:
                    _remove(Path(item.path))

    # -- the codegen directory ----------------------------------------------------------------

    def materialise(self, key: str, program: DeviceProgram, codegen_dir: Path) -> None:
        """Fill ``codegen_dir`` from the entry (hard links, else copies; program.json last),
        or write ``program`` there when the entry is gone (removed by someone else)."""
        source = self.entry(key)
        files = sorted((p for p in source.rglob("*") if p.is_file() and p.name != _ENTRY_FILE),
                       key=lambda p: (p.name == "program.json", str(p)))
        try:
            for file in files:
                _place(file, codegen_dir / file.relative_to(source))
        except FileNotFoundError as exc:
            if exc.filename is not None and Path(exc.filename).is_relative_to(source):
                program.save(codegen_dir)
                return
            raise _codegen_error(codegen_dir, exc) from None
        except OSError as exc:
            raise _codegen_error(codegen_dir, exc) from None
        if not files:
            program.save(codegen_dir)


def _place(source: Path, target: Path) -> None:
    """Put ``source``'s bytes at ``target`` through a temporary name and a rename."""
    with contextlib.suppress(OSError):
        if os.path.samefile(source, target):
            return  # already linked by an earlier hit
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        try:
            os.link(source, tmp)  # entries are never modified in place, so sharing is safe
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not source.exists():
                raise
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        # Gone after a rename, except when target was already a link to the same file (then
        # rename(2) does nothing and leaves tmp) or the rename failed.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


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
