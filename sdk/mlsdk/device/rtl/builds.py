"""The simulators' builds, cached under ``build/cosim`` and checked once per process.

:func:`build_icarus` exports the testbench top to Verilog and compiles it with iverilog (through
cocotb's runner), once per design: a cached ``sim.vvp`` is used only when it is complete.
:data:`BUILDS` remembers, per process, the build folders already built or checked, so a session
after the first skips the export's digest and the cache's checks. The Verilator model's build is
:func:`~mlsdk.device.rtl.verilator.build_verilator`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from mncore_hdl.arch import ArchConfig
from mncore_hdl.tooling.files import build_lock
from mncore_hdl.tooling.progress import ticking

from .runfolder import COSIM_ROOT

__all__ = ["BUILD_ROOT", "BUILDS", "BuildMemo", "build_icarus"]

#: Where the cocotb simulators' builds go (``build/cosim``).
BUILD_ROOT = COSIM_ROOT


def build_icarus(config: ArchConfig, say: Callable[[str], None] = lambda s: None) -> Path:
    """Export and compile the testbench top for ``config`` (cached); return the cocotb build folder.

    A cached ``sim.vvp`` is used only when it is complete: it must match the stamp written
    beside it after its build (``sim.vvp.ok``: size and SHA-256), or, for a cache entry from
    before stamps, end with iverilog's whole file-name table. A partial one (an interrupted
    build, a full disk) is rebuilt; if the rebuild is no better, the RuntimeError names the
    file to delete.
    """
    from cocotb_tools.runner import get_runner
    from mncore_hdl.top.cosim_tb import TB_MODULE, export_cosim_tb

    with ticking(say, "exporting the co-simulation top to Verilog (once per design, then "
                 "cached)"):
        sources = export_cosim_tb(config, BUILD_ROOT / "verilog")
    key = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    build_dir = BUILD_ROOT / "icarus" / f"{TB_MODULE}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    vvp = build_dir / "sim.vvp"
    with build_lock(build_dir / ".lock"):  # one compile at a time
        if vvp.exists() and not _vvp_complete(vvp):
            say(f"the cached {vvp} is incomplete; rebuilding it")
            vvp.unlink()
        if not vvp.exists():
            _stamp(vvp).unlink(missing_ok=True)
            with ticking(say, "compiling the Verilog with iverilog"):
                get_runner("icarus").build(sources=sources, hdl_toplevel=TB_MODULE,
                                           build_dir=build_dir, waves=True,
                                           timescale=("1ns", "1ps"))
            if not vvp.exists() or not _vvp_well_formed(vvp):
                raise RuntimeError(f"iverilog left an incomplete {vvp}; delete it (and "
                                   f"{build_dir}) and try again")
            _stamp(vvp).write_text(_fingerprint(vvp))
    return build_dir


class BuildMemo:
    """Build folders already built or checked, by (simulator and variant, config): a session
    after the first one skips the export's digest and the build cache's checks (0.2-0.4 s)."""

    def __init__(self) -> None:
        self._folders: dict[tuple[str, str], Path] = {}

    def folder(self, kind: str, config: ArchConfig,
               build: Callable[[Callable[[str], None]], Path],
               say: Callable[[str], None]) -> Path:
        """``build(say)``, once per (``kind``, ``config``) while its folder exists."""
        key = (kind, config.to_json())
        known = self._folders.get(key)
        if known is not None and known.is_dir():
            return known
        self._folders[key] = build_dir = build(say)
        return build_dir


#: This process's memo, shared by every Icarus and Verilator session.
BUILDS = BuildMemo()


def _stamp(vvp: Path) -> Path:
    return vvp.with_name(vvp.name + ".ok")


def _fingerprint(vvp: Path) -> str:
    data = vvp.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def _vvp_complete(vvp: Path) -> bool:
    """True when ``vvp`` matches its build stamp (or, unstamped, is well formed)."""
    stamp = _stamp(vvp)
    try:
        if stamp.exists():
            return stamp.read_text() == _fingerprint(vvp)
        if _vvp_well_formed(vvp):
            stamp.write_text(_fingerprint(vvp))
            return True
    except OSError:
        pass
    return False


def _vvp_well_formed(vvp: Path) -> bool:
    """True when ``vvp`` has iverilog's header and ends with its complete file-name table
    (``:file_names N;`` and N quoted lines), which iverilog writes last."""
    try:
        with open(vvp, "rb") as handle:
            head = handle.read(256)
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 65536))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    if not head.startswith(b"#!") or b":ivl_version" not in head:
        return False
    marker = tail.rfind(":file_names ")
    if marker < 0 or not tail.endswith("\n"):
        return False
    first, *names = tail[marker:].rstrip("\n").split("\n")
    try:
        count = int(first.removeprefix(":file_names ").rstrip(";"))
    except ValueError:
        return False
    return len(names) == count and all(n.strip().startswith('"') and n.strip().endswith('";')
                                       for n in names)
