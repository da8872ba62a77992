"""Run a program of ``examples/`` as its users do: a child Python with the kit's source folders
on ``PYTHONPATH``, so the example imports this checkout (not an installed copy)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ..paths import CHECKOUT, source_roots

__all__ = ["ROOT", "run_example"]

#: The checkout: examples/, sdk/, compiler/, hdl/ sit here.
ROOT = CHECKOUT


def run_example(name: str, *args: str, cwd: Path, env: Mapping[str, str] | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>`` with ``args`` in ``cwd``; return the finished process (its
    ``stdout`` and ``stderr`` as text).

    ``env`` adds to (or overrides) the environment. Raises AssertionError, carrying the
    program's standard error, when it exits with a non-zero status.
    """
    if ROOT is None:
        raise RuntimeError("examples/ lives in a source checkout of the kit, and these "
                           "packages are installed from a wheel")
    path = os.pathsep.join(map(str, source_roots()))
    run = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=cwd,
                         env={**os.environ, "PYTHONPATH": path, **(env or {})},
                         capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise AssertionError(f"examples/{name} {' '.join(args)} exited with status "
                             f"{run.returncode}:\n{run.stderr}")
    return run
