"""The compile cache: ``Context.compile(..., cache_options=CacheOptions(path))``.

A cache entry is one compiled device program, stored under a key that hashes everything that
decides it: the captured graph (its canonical JSON and every constant's bits), the sample
inputs' names, shapes and dtypes, the program name, the compile options, the
``io_spec_constraints`` layouts, the architecture config, and the kit version (``mlsdk``'s
version, the program format, and a hash of the compiler's and the layout library's sources).
The function is always captured (traced) first, since the key is its graph; a hit skips the pass
pipeline and the writing of the program, and fills the codegen directory from the entry.

The directory itself (entries written whole or not at all, their eviction) is
:mod:`mlsdk.cachedir`. See ``docs/cache.md`` for what each ``enable_*`` flag controls and how
errors are handled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
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
           "cache_key", "compile_program", "kit_version", "prune"]

#: The logger that says hit, miss or off for every compile (INFO) and why an entry was dropped.
logger = logging.getLogger("mlsdk.cache")

# torch's make_fx is not thread-safe: captures from two threads at once corrupt its state.
_CAPTURE_LOCK = threading.Lock()
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
    store = CacheDir.open(cache_options.root) if cache_options and cache_options.enabled else None
    with _one_torch_thread():
        program, status, key, optimizers = _compile(
            fn, sample_inputs, codegen_dir, store, name=name, float_dtype=float_dtype,
            constraints=constraints, config=config, options=options, registered=registered,
            training=training,
            max_bytes=cache_options.max_bytes if cache_options else None)
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
             codegen_dir: Path, store: CacheDir | None, *, name: str, float_dtype: str,
             constraints: dict[str, Layout], config: ArchConfig, options: dict[str, Any],
             registered: Mapping[int, str] | None, training: bool | None,
             max_bytes: int | None = None,
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
    inputs = tuple((n, str(t)) for n, t in graph.inputs.items())
    found = store.lookup(key, name, config, graph=graph_hash(graph), inputs=inputs)
    status = "hit" if found is not None else "miss"
    if found is not None:
        program, in_place = found, True
    else:
        program = compile_graph(graph, constraints=constraints, config=config, options=options,
                                name=name, float_dtype=float_dtype, state=state,
                                state_writes=writes)
        in_place = store.store(key, program, name, config,
                               {"kit": kit_version(), "graph": graph_hash(graph)})
        if in_place and max_bytes is not None:
            _prune_after_store(store, max_bytes, key)
    if in_place:
        store.materialise(key, program, codegen_dir)
    else:
        program.save(codegen_dir)
    return program, status, key, optimizers


def _prune_after_store(store: CacheDir, max_bytes: int, key: str) -> None:
    try:
        store.prune(max_bytes, keep=key)
    except OSError as exc:  # the bound is housekeeping: it never costs the compile
        warnings.warn(f"Could not prune the compile cache {str(store.root)!r} to {max_bytes} "
                      f"bytes: {exc}", CacheWarning, stacklevel=4)


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


def graph_hash(graph: Graph) -> str:
    """The hex SHA-256 of the captured graph and its constants' bits, which an entry stores
    and a hit re-checks: an entry holding another graph's program is a miss."""
    digest = hashlib.sha256(_canonical(graph.to_json()))
    for cname, tensor in graph.constants.items():
        digest.update(_canonical([cname, list(tensor.shape), str(tensor.dtype)]))
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


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr).encode()
