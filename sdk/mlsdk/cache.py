"""The compile cache: ``Context.compile(..., cache_options=CacheOptions(path))``.

A cache entry is one compiled device program, stored under a key that hashes everything that
decides it: the captured graph (its canonical JSON and every constant's bits), the sample
inputs' names, shapes and dtypes, the :class:`~mncore_compiler.request.CompileRequest` (program
name, compile options, ``io_spec_constraints``, architecture config), the captured state, and
the kit version (``mlsdk``'s version, the program format, and a hash of the compiler's and the
layout library's sources). The cache wraps the compile path (:mod:`mlsdk.compiling`), which
captures first, since the key is the graph: a hit skips the pass pipeline and the writing of
the program, and fills the codegen directory from the entry.

The directory itself (entries written whole or not at all, their eviction) is
:mod:`mlsdk.cachedir`. See ``docs/cache.md`` for what each ``enable_*`` flag controls and how
errors are handled.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from mncore_compiler.capture import Captured
from mncore_compiler.ir import Graph
from mncore_compiler.program import PROGRAM_FORMAT, PROGRAM_VERSION, DeviceProgram
from mncore_compiler.request import CompileRequest
from mncore_hdl.layout import to_bits
from mncore_hdl.tooling.files import canonical_json

from .cachedir import (
    CACHE_FORMAT,
    CACHE_VERSION,
    CacheDir,
    CacheError,
    CacheWarning,
    PruneResult,
    check_max_bytes,
    prune,
)

__all__ = ["CacheError", "CacheOptions", "CacheResult", "CacheWarning", "PruneResult",
           "cache_key", "graph_hash", "kit_version", "open_store", "prune", "through_cache"]

_FLAGS = ("enable_app_cache", "enable_onnx_cache", "enable_codegen_cache",
          "enable_gpfn2obj_cache")


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
    max_bytes : int or None
        A bound on the cache directory's entries (this kit's addition): after each store, the
        entries used longest ago are removed until the rest fit (see :func:`prune`); the entry
        just stored is kept even when it alone is larger. None (the default): no bound.
    """

    path: str | os.PathLike[str]
    enable_app_cache: bool = True
    enable_onnx_cache: bool = True
    enable_codegen_cache: bool = True
    enable_gpfn2obj_cache: bool = True
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
            raise TypeError("CacheOptions path must be a non-empty str or path-like (e.g. "
                            f"storage.path(...)), not {self.path!r}")
        for flag in _FLAGS:
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise TypeError(f"CacheOptions {flag} must be a bool, not {value!r}")
        if self.max_bytes is not None:
            check_max_bytes(self.max_bytes, "CacheOptions max_bytes")

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
    """

    status: str
    key: str | None = None
    entry: Path | None = None
    seconds: float = 0.0


def open_store(cache_options: CacheOptions | None) -> CacheDir | None:
    """The cache directory ``cache_options`` enables (created if needed), or None when it
    is off.

    Raises
    ------
    TypeError
        When ``cache_options`` is not a CacheOptions or None.
    CacheError
        When the directory cannot be created or written.
    """
    if cache_options is not None and not isinstance(cache_options, CacheOptions):
        raise TypeError("cache_options must be a CacheOptions(path, ...) or None, not "
                        f"{type(cache_options).__name__}")
    if cache_options is None or not cache_options.enabled:
        return None
    return CacheDir.open(cache_options.root)


def through_cache(captured: Captured, request: CompileRequest, codegen_dir: Path,
                  store: CacheDir, max_bytes: int | None,
                  compile: Callable[[], DeviceProgram]) -> tuple[DeviceProgram, str, str]:
    """Read the program of ``captured`` + ``request`` from the cache, or ``compile()`` it and
    store it; fill ``codegen_dir`` either way. Returns the program, ``"hit"`` or ``"miss"``,
    and the key.

    ``max_bytes`` bounds the directory after a store (:attr:`CacheOptions.max_bytes`).
    """
    graph, config = captured.graph, request.config
    key = cache_key(captured, request)
    inputs = tuple((n, str(t)) for n, t in graph.inputs.items())
    found = store.lookup(key, request.name, config, graph=graph_hash(graph), inputs=inputs)
    if found is not None:
        program, in_place = found, True
    else:
        program = compile()
        in_place = store.store(key, program, request.name, config,
                               {"kit": kit_version(), "graph": graph_hash(graph)})
        if in_place and max_bytes is not None:
            _prune_after_store(store, max_bytes, key)
    if in_place:
        store.materialise(key, program, codegen_dir)
    else:
        program.save(codegen_dir)
    return program, "hit" if found is not None else "miss", key


def _prune_after_store(store: CacheDir, max_bytes: int, key: str) -> None:
    try:
        store.prune(max_bytes, keep=key)
    except OSError as exc:  # the bound is housekeeping: it never costs the compile
        warnings.warn(f"Could not prune the compile cache {str(store.root)!r} to {max_bytes} "
                      f"bytes: {exc}", CacheWarning, stacklevel=4)


# -- the key ------------------------------------------------------------------------------------


def cache_key(captured: Captured, request: CompileRequest) -> str:
    """The hex SHA-256 naming the entry of a compile: any change of the captured graph or
    state, or of what the request decides
    (:meth:`~mncore_compiler.request.CompileRequest.key_parts`), changes it."""
    graph, state, state_writes = captured.graph, captured.state, captured.state_writes
    digest = hashlib.sha256()

    def part(label: str, value: Any) -> None:
        digest.update(label.encode() + b"\0" + canonical_json(value, default=repr) + b"\0")

    part("format", [CACHE_FORMAT, CACHE_VERSION])
    part("kit", kit_version())
    part("inputs", [[n, list(t.shape), t.dtype] for n, t in graph.inputs.items()])
    part("graph", graph.to_json())
    for cname, tensor in graph.constants.items():
        bits = np.ascontiguousarray(to_bits(tensor))
        part("constant", [cname, list(tensor.shape), str(tensor.dtype), str(bits.dtype)])
        digest.update(bits.data)
    part("request", request.key_parts())
    part("state", dict(state))  # which constants are registered module state
    if state_writes:  # which registered tensors a training step updates, from which output
        part("state_writes", dict(state_writes))
    return digest.hexdigest()


def graph_hash(graph: Graph) -> str:
    """The hex SHA-256 of the captured graph and its constants' bits, which an entry stores
    and a hit re-checks: an entry holding another graph's program is a miss."""
    digest = hashlib.sha256(canonical_json(graph.to_json(), default=repr))
    for cname, tensor in graph.constants.items():
        digest.update(canonical_json([cname, list(tensor.shape), str(tensor.dtype)], default=repr))
        digest.update(np.ascontiguousarray(to_bits(tensor)).data)
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

    from ._version import __version__

    files = [*sorted(Path(mncore_compiler.__file__).parent.rglob("*.py")),
             *sorted(Path(mncore_hdl.layout.__file__).parent.rglob("*.py")),
             Path(mncore_hdl.arch.__file__)]
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.parent.name}/{file.name}".encode() + b"\0")
        digest.update(file.read_bytes())
    return {"mlsdk": __version__, "program": f"{PROGRAM_FORMAT}/{PROGRAM_VERSION}",
            "sources": digest.hexdigest()}

