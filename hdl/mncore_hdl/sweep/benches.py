"""Running one sweep point on an RTL bench: the cached Verilog, and one cocotb test run."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..tooling.files import build_lock

__all__ = ["export_once", "run_bench"]


def export_once(factory: Callable[[], Any], name: str, meta: dict[str, Any], design: Any,
                build_root: Path) -> Path:
    """``tooling.verilog.export_verilog`` under a lock per design and config, so that workers
    racing on one node convert a design once and share it."""
    from ..tooling.verilog import export_verilog

    out = build_root / "verilog"
    out.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
    with build_lock(out / f".{name}-{tag}.lock"):
        return export_verilog(factory, name, meta, out, design=design)


def run_bench(verilog: Path, toplevel: str, module: str, testcase: str, name: str,
              env: dict[str, str], simulator: str) -> None:
    """Run cocotb test ``testcase`` of ``sim/<module>.py`` on ``simulator`` for point ``name``
    (its folder ``build/sim/<name>``, no waves); a failed bench raises RuntimeError."""
    import pytest

    from ..testing.runner import run_cocotb

    env = {"COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING", **env}
    saved = os.environ.get("SIM")
    os.environ["SIM"] = simulator  # the runner picks its simulator from $SIM
    try:
        run_cocotb(verilog, toplevel, module, testcase, seed=1, test_name=name, extra_env=env,
                   waves=False)
    except pytest.fail.Exception as exc:  # the runner reports a failed bench through pytest
        raise RuntimeError(str(exc)) from None
    finally:
        if saved is None:
            os.environ.pop("SIM", None)
        else:
            os.environ["SIM"] = saved
