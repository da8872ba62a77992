"""The compile path of ``Context.compile``: capture, then the compiler (through the compile cache
when one is enabled), then the codegen directory.

One :class:`~mncore_compiler.request.CompileRequest` carries every setting; the cache
(:mod:`mlsdk.cache`) wraps the compile step, it does not own it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mncore_compiler.driver import capture_request, compile_captured
from mncore_compiler.program import DeviceProgram
from mncore_compiler.request import CompileRequest
from mncore_compiler.step_state import OptimizerRecord

from .cache import CacheOptions, CacheResult, open_store, through_cache

__all__ = ["CompileResult", "compile_to_directory"]

#: The logger that says hit, miss or off for every compile (INFO) and why an entry was dropped.
logger = logging.getLogger("mlsdk.cache")

# torch's make_fx is not thread-safe: captures from two threads at once corrupt its state.
_CAPTURE_LOCK = threading.Lock()


@dataclass(frozen=True)
class CompileResult:
    """What one compile produced.

    Attributes
    ----------
    program : DeviceProgram
        The program, also written to the codegen directory.
    cache : CacheResult
        What the cache did (``status`` ``"off"`` without one).
    optimizers : tuple of OptimizerRecord
        The torch optimizers the captured function closes over, with their parameter lists
        as captured (a training step checks them at each call).
    """

    program: DeviceProgram
    cache: CacheResult
    optimizers: tuple[OptimizerRecord, ...] = ()


def compile_to_directory(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
                    codegen_dir: Path, request: CompileRequest,
                    cache_options: CacheOptions | None = None) -> CompileResult:
    """Compile ``fn`` as ``request`` says into ``codegen_dir``, through the cache when
    ``cache_options`` enables it.

    Raises
    ------
    TypeError
        When ``request`` is not a CompileRequest or ``cache_options`` not a CacheOptions.
    CacheError
        When the cache directory cannot be created or written (checked before compiling).
    """
    start = time.perf_counter()
    if not isinstance(request, CompileRequest):
        raise TypeError(f"request must be a CompileRequest, not {type(request).__name__}")
    store = open_store(cache_options)  # checked (and created) before compiling
    with _one_torch_thread():
        with _CAPTURE_LOCK:
            captured = capture_request(fn, sample_inputs, request)
        optimizers = tuple(captured.optimizers)
        if store is None or cache_options is None:
            program = compile_captured(captured, request)
            program.save(codegen_dir)
            result = CacheResult("off", seconds=time.perf_counter() - start)
            logger.info("compile %s: cache off (%.3f s)", request.name, result.seconds)
            return CompileResult(program, result, optimizers)
        program, status, key = through_cache(captured, request, codegen_dir, store,
                                             cache_options.max_bytes,
                                             lambda: compile_captured(captured, request))
    result = CacheResult(status, key, store.entry(key), time.perf_counter() - start)
    logger.info("compile %s: cache %s, key %s (%.3f s)", request.name, status, key[:16],
                result.seconds)
    return CompileResult(program, result, optimizers)


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch's CPU kernels on one thread while tracing and compiling.

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
