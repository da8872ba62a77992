"""Verilog export of Amaranth components, cached per configuration, with a metadata JSON."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["export_verilog", "export_memctrl", "source_digest"]

_HDL_ROOT = Path(__file__).resolve().parent


def source_digest(roots: list[Path] | None = None) -> str:
    """Hash of the Python sources under ``roots`` (default: all of ``mncore_hdl``).

    Part of the cache key, so an edited design is never served stale.
    """
    h = hashlib.sha256()
    paths: set[Path] = set()
    for root in roots or [_HDL_ROOT]:
        paths.update([root] if root.is_file() else root.rglob("*.py"))
    for path in sorted(paths):
        h.update(str(path.relative_to(_HDL_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


# Amaranth's RTLIL backend spells a memory's initial contents bit by bit (one net per bit), and
# yosys then writes one assignment per word: for the co-simulation top's four backing stores
# (then 128 Ki words of 64 bit each) that was most of a 5-minute export. A memory whose initial
# contents are all zero is exported with no initialiser at all, and the Verilog gets a loop that
# zeroes it at time 0, which is what the initialiser meant. Memories with non-zero contents go
# through unchanged.
_MEM_DECL = re.compile(r"^  reg \[\d+:0\] (?P<name>\S+) \[(?P<hi>\d+):0\];\n",
                       re.MULTILINE)


@contextlib.contextmanager
def _zero_memories_uninitialised() -> Iterator[None]:
    """While converting, skip the ``$meminit_v2`` cell of every all-zero memory."""
    from amaranth.back import rtlil

    emitter = getattr(rtlil, "ModuleEmitter", None)
    original = getattr(emitter, "emit_memory", None)
    if original is None:  # another Amaranth release: keep its own (slower) path
        yield
        return

    def emit_memory(self: Any, cell_idx: Any, cell: Any) -> None:
        if any(cell.init):
            original(self, cell_idx, cell)

    emitter.emit_memory = emit_memory  # type: ignore[union-attr]
    try:
        yield
    finally:
        emitter.emit_memory = original  # type: ignore[union-attr]


def _zero_fill_memories(text: str) -> str:
    """Give every memory that yosys wrote without an ``initial`` block a zeroing loop."""
    def repl(mt: re.Match[str]) -> str:
        if text.startswith("  initial", mt.end()):
            return mt[0]
        name, hi = mt["name"], mt["hi"]
        return (f"{mt[0]}  integer {name}__i;\n"
                f"  initial for ({name}__i = 0; {name}__i <= {hi}; {name}__i = {name}__i + 1)\n"
                f"    {name}[{name}__i] = 0;\n")
    return _MEM_DECL.sub(repl, text)


# yosys makes every ``always @*`` block sensitive to a register initialised to 0 so that it runs
# at time zero; Icarus does not treat the initialiser as an event, leaving combinational
# outputs at X until an input changes. Toggling the register once at time 0 fixes that.
_COMB_KICK = re.compile(r"^(  reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+)  = 0;)$",
                        re.MULTILINE)


def _kick_comb_blocks(text: str) -> str:
    return _COMB_KICK.sub(lambda mt: f"{mt[1]}\n  initial #0 {mt[2]}  = 1;", text)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def export_verilog(factory: Callable[[], Any], name: str, metadata: dict[str, Any],
                   build_dir: str | os.PathLike[str] = "build/verilog",
                   sources: list[Path] | None = None) -> Path:
    """Convert ``factory()`` to ``<build_dir>/<name>-<key>/<name>.v``, once per key.

    Parameters
    ----------
    factory : callable
        Returns the ``wiring.Component`` to convert (only called on a cache miss). Its ports
        come from its signature; nested members are named ``outer__inner``.
    name : str
        Verilog module name of the top and the file stem.
    metadata : dict
        JSON-serialisable description of what was built (the config, port count, ...). It
        is written to ``<name>.json`` beside the Verilog, and it keys the cache together
        with the ``mncore_hdl`` sources.
    build_dir : path-like
        Parent folder of the cached builds (keep it in the ignored ``build/``).
    sources : list of Path, optional
        Files or folders whose Python sources the design depends on (part of the cache key);
        default: the whole ``mncore_hdl`` package.

    Returns
    -------
    pathlib.Path
        The Verilog file.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"Module name must be a Verilog identifier, not {name!r}")
    meta_text = json.dumps(metadata, sort_keys=True, indent=2)
    key = hashlib.sha256((meta_text + source_digest(sources)).encode()).hexdigest()[:16]
    out_dir = Path(build_dir) / f"{name}-{key}"
    v_path = out_dir / f"{name}.v"
    j_path = out_dir / f"{name}.json"
    if v_path.exists() and j_path.exists():
        return v_path
    from amaranth.back import verilog

    out_dir.mkdir(parents=True, exist_ok=True)
    with _zero_memories_uninitialised():
        text = verilog.convert(factory(), name=name, emit_src=False)
    _atomic_write(v_path, _kick_comb_blocks(_zero_fill_memories(text)))
    _atomic_write(j_path, json.dumps({"module": name, "key": key, **metadata},
                                     sort_keys=True, indent=2) + "\n")
    return v_path


def export_memctrl(config: Any, ports: int = 3, build_dir: str | os.PathLike[str] = "build/verilog",
                   name: str = "memctrl") -> Path:
    """Export :class:`~mncore_hdl.memctrl.controller.MemoryController` for ``config``."""
    from .memctrl.controller import MemoryController, check_config

    check_config(config)

    def build() -> Any:
        return MemoryController(config, ports)

    meta = {"component": "MemoryController", "ports": ports, "config": config.to_dict()}
    sources = [_HDL_ROOT / "memctrl", _HDL_ROOT / "arch.py", Path(__file__).resolve()]
    return export_verilog(build, name, meta, build_dir, sources)
