"""The device program: what compilation produces, written to and reloaded from a codegen directory.

A codegen directory holds:

- ``program.json``: format name and version, the architecture config, the options, the IR
  graph, the layout and byte size of every input, output and constant, the FLOP count, which
  constants are registered module state (``state``), and a SHA-256 of all of it plus every
  constant file (to detect corruption);
- ``constants/<sha256>.npy``: each constant's raw element bits, C order, named by the SHA-256
  of the file's bytes (content-addressed: a recompile never overwrites a file the previous
  program uses, so a reader sees the old program or the new one, never a mix);
- ``program.txt``: the same program for people to read (IR and layouts).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import Layout, from_bits, to_bits
from mncore_hdl.tooling.files import STALE_SECONDS, atomic_write, canonical_json, is_stale_temporary

from .errors import CodegenError, CompilerError
from .ir import Graph, TensorType
from .ops import get_op
from .program_check import MAX_PROGRAM_BYTES, check_body, check_tables

__all__ = ["DeviceProgram", "PROGRAM_FORMAT", "PROGRAM_VERSION", "body_checksum",
           "codegen_files", "graph_flops", "replacing_program"]

PROGRAM_FORMAT = "mncore-cosim-program"
PROGRAM_VERSION = 1
_PROGRAM_FILE = "program.json"
_TEXT_FILE = "program.txt"
#: Reads of a codegen directory a concurrent recompile changed under the reader, before giving up.
_LOAD_ATTEMPTS = 5
# What a hostile program.json can make the parsers raise; reported as a corrupt program.
_PARSE_ERRORS = (KeyError, TypeError, ValueError, OSError, AttributeError, IndexError,
                 OverflowError, RecursionError, MemoryError, CompilerError)


def graph_flops(graph: Graph) -> int:
    """Floating-point operations one execution of ``graph`` performs."""
    types = graph.value_types()
    return sum(get_op(n.op).flops([types[o] for o in n.operands], n.attrs) for n in graph.nodes)


@dataclass
class DeviceProgram:
    """A compiled function, ready to load on a device.

    Attributes
    ----------
    name : str
        The function's name.
    graph : Graph
        The verified IR (constants included).
    layouts : dict of str to Layout
        DRAM layout of every input and constant.
    output_layouts : dict of str to Layout
        DRAM layout of every output (outputs may share an input's name).
    inputs, outputs : tuple of str
        IO names in calling / returning order.
    arch : ArchConfig
        The chip it was compiled for.
    options : dict
        The compile options, as given (JSON-able).
    state : dict of str to str
        Constant name -> registered name, for each constant that is registered module state
        (``mlsdk.Context.registry``): the runtime reads it from the Context's persistent
        device copy of that tensor rather than uploading the value stored here.
    state_writes : dict of str to str
        Registered name -> graph output, for each registered tensor a training step updates
        in place: after the program ran, that output's value is stored into the tensor's
        device copy, in ``output_layouts[output]`` (the layout the program reads it in). These
        outputs are not in :attr:`outputs` (the function's own) and have no output spec.
    """

    name: str
    graph: Graph
    layouts: dict[str, Layout]
    output_layouts: dict[str, Layout]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    arch: ArchConfig
    options: dict[str, Any] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    state_writes: dict[str, str] = field(default_factory=dict)

    @property
    def launch_outputs(self) -> tuple[str, ...]:
        """Every output a Launch stores: the function's own, then the state writes."""
        return (*self.outputs, *self.state_writes.values())

    @property
    def constants(self) -> tuple[str, ...]:
        return tuple(self.graph.constants)

    @property
    def flops(self) -> int:
        return graph_flops(self.graph)

    @property
    def output_types(self) -> dict[str, TensorType]:
        return self.graph.output_types()

    # -- writing ----------------------------------------------------------------------------

    def layout_of(self, name: str, output: bool = False) -> Layout:
        """The layout of input/constant ``name``, or of output ``name`` when ``output``."""
        return self.output_layouts[name] if output else self.layouts[name]

    def _io_entry(self, name: str, ttype: TensorType, output: bool = False) -> dict[str, Any]:
        layout = self.layout_of(name, output)
        return {"name": name, "shape": list(ttype.shape), "dtype": ttype.dtype,
                "layout": str(layout), "nbytes": layout.nbytes, "groups": layout.groups,
                "lw_per_group": layout.lw_per_group}

    def save(self, directory: str | Path) -> Path:
        """Write the program into ``directory`` (created if needed); return the JSON's path.

        Every file is written under a temporary name and renamed into place, constants first
        (under names of their content, so the previous program's files stay as they were) and
        ``program.json`` last, so a reader finds the previous program or the new one, never a
        mix, and a kill at any point leaves the previous program loadable. The previous
        program's files the new one does not use are removed afterwards (see
        :func:`replacing_program`). Raises CodegenError, naming the path, when the directory
        cannot be written or its ``constants/`` is not a plain directory (a symlink, say).
        """
        root = Path(directory)
        try:
            return self._save(root)
        except RecursionError:  # pathlib creates parents recursively
            raise CodegenError(f"Cannot write the codegen directory {str(root)[:200]!r}...: "
                               f"it is {len(root.parts)} levels deep; choose a shallower "
                               "directory") from None
        except OSError as exc:
            where = exc.filename if exc.filename is not None else root
            raise CodegenError(
                f"Cannot write the codegen directory {str(root)!r}: {where}: "
                f"{exc.strerror or exc}; choose a writable directory"
            ) from None

    def _save(self, root: Path) -> Path:
        with replacing_program(root) as written:
            return self._write(root, written)

    def _write(self, root: Path, written: set[str]) -> Path:
        constants = []
        _constants_dir(root)
        for name, tensor in self.graph.constants.items():
            stream = io.BytesIO()
            np.save(stream, to_bits(tensor), allow_pickle=False)
            raw = stream.getvalue()
            sha = hashlib.sha256(raw).hexdigest()
            rel = f"constants/{sha}.npy"
            atomic_write(root / rel, raw)
            written.add(rel)
            entry = self._io_entry(name, TensorType.of(tensor))
            entry["file"] = rel
            entry["sha256"] = sha
            constants.append(entry)
        body = {
            "format": PROGRAM_FORMAT,
            "version": PROGRAM_VERSION,
            "name": self.name,
            "arch": self.arch.to_dict(),
            "options": self.options,
            "flops": self.flops,
            "inputs": [self._io_entry(n, self.graph.inputs[n]) for n in self.inputs],
            "outputs": [self._io_entry(n, self.output_types[n], True) for n in self.outputs],
            "constants": constants,
            "state": dict(self.state),
            "state_writes": [self._io_entry(out, self.output_types[out], True)
                             | {"registered": name} for name, out in self.state_writes.items()],
            "graph": self.graph.to_json(),
        }
        body["sha256"] = body_checksum(body)
        path = root / _PROGRAM_FILE
        atomic_write(root / _TEXT_FILE, (self.describe() + "\n").encode())
        atomic_write(path, (json.dumps(body, indent=1) + "\n").encode())
        written.update((_TEXT_FILE, _PROGRAM_FILE))
        return path

    def describe(self) -> str:
        """The program as text: IO layouts and the IR."""
        lines = [f"program {self.name} ({PROGRAM_FORMAT} v{PROGRAM_VERSION}), "
                 f"{self.flops} flops"]
        for kind, names in (("input", self.inputs), ("output", self.outputs),
                            ("constant", self.constants)):
            for name in names:
                layout = self.layout_of(name, kind == "output")
                state = (f", registered state {self.state[name]!r}"
                         if kind == "constant" and name in self.state else "")
                lines.append(f"  {kind:8} {name}: {layout.dtype} {layout} "
                             f"({layout.nbytes} B{state})")
        for registered, out in self.state_writes.items():
            layout = self.output_layouts[out]
            lines.append(f"  updates  {registered!r} from %{self.graph.outputs[out]}: "
                         f"{layout.dtype} {layout} ({layout.nbytes} B)")
        lines.append(str(self.graph))
        return "\n".join(lines)

    # -- reading ----------------------------------------------------------------------------

    @classmethod
    def load(cls, directory: str | Path) -> DeviceProgram:
        """Read a program back; CodegenError says what is missing, stale, corrupt, or larger
        than the chip's DRAM (``arch.groups * arch.dram_bytes_per_group``)."""
        root = Path(directory)
        path = root / _PROGRAM_FILE
        if not root.is_dir():
            raise CodegenError(f"Codegen directory {str(root)!r} does not exist; compile the "
                               "function into it first")
        if not path.is_file():
            raise CodegenError(f"Codegen directory {str(root)!r} holds no {_PROGRAM_FILE}; "
                               "it was not written by Context.compile")
        for _ in range(_LOAD_ATTEMPTS):
            raw = _read_program_json(path)
            try:
                return cls._parse(root, path, raw)
            except _ConstantChanged:
                # A recompile replaced the program while this read its constants: read the
                # new program.json when there is one, else the constant is really gone.
                if _read_program_json(path) == raw:
                    raise
        raise CodegenError(f"{path} kept changing while being read (recompiled "
                           f"{_LOAD_ATTEMPTS} times meanwhile); load it again")

    @classmethod
    def _parse(cls, root: Path, path: Path, raw: bytes) -> DeviceProgram:
        try:
            body = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            what = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise CodegenError(f"{path} is corrupt (not valid JSON: {what}); recompile") from None
        if not isinstance(body, dict) or body.get("format") != PROGRAM_FORMAT:
            raise CodegenError(f"{path} is not an {PROGRAM_FORMAT} file; recompile")
        if body.get("version") != PROGRAM_VERSION:
            raise CodegenError(
                f"{path} is format version {body.get('version')!r}; this kit reads version "
                f"{PROGRAM_VERSION}. Recompile the function with this kit."
            )
        try:
            program = cls._from_body(root, body)
        except CodegenError:
            raise
        except _PARSE_ERRORS as exc:
            raise CodegenError(f"{path} is corrupt ({type(exc).__name__}: {exc}); "
                               "recompile") from None
        return program

    @classmethod
    def _from_body(cls, root: Path, body: dict[str, Any]) -> DeviceProgram:
        stored = body.pop("sha256", None)
        # Types and sizes first (cheap, and bounds what the checksum hashes); a resealed edit
        # is caught here or by check_tables below.
        check_body(body, root / _PROGRAM_FILE)
        if body_checksum(body) != stored:
            raise CodegenError(f"{root / _PROGRAM_FILE} is corrupt (checksum mismatch); "
                               "recompile")
        layouts: dict[str, Layout] = {}
        output_layouts: dict[str, Layout] = {}
        constants: dict[str, torch.Tensor] = {}
        for entry in body["constants"]:
            if not isinstance(entry["file"], str) or not _safe_rel(entry["file"]):
                raise CodegenError(f"Constant file {entry['file']!r} in {root / _PROGRAM_FILE} "
                                   "is not a constants/ file; recompile")
            file = root / entry["file"]
            try:
                raw = file.read_bytes()  # read once: checksummed, then parsed from memory
            except (FileNotFoundError, IsADirectoryError):
                raise _ConstantChanged(f"Constant file {str(file)!r} is missing; "
                                       "recompile") from None
            if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
                raise _ConstantChanged(f"Constant file {str(file)!r} is corrupt (checksum "
                                       "mismatch); recompile")
            bits = np.load(io.BytesIO(raw), allow_pickle=False)
            constants[entry["name"]] = from_bits(bits, entry["dtype"])
        for entry in body["inputs"] + body["constants"]:
            layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        writes = body.get("state_writes", [])
        for entry in body["outputs"] + writes:
            output_layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        graph = Graph.from_json(body["graph"], constants)  # verified there
        program = cls(name=body["name"], graph=graph, layouts=layouts,
                      output_layouts=output_layouts,
                      inputs=tuple(e["name"] for e in body["inputs"]),
                      outputs=tuple(e["name"] for e in body["outputs"]),
                      arch=ArchConfig.from_dict(body["arch"]), options=body["options"],
                      state=_state_entry(body.get("state", {}), graph),
                      state_writes=_writes_entry(writes, graph))
        _check_fits(program, root / _PROGRAM_FILE)
        check_tables(body, graph, layouts, output_layouts, program.flops, root / _PROGRAM_FILE)
        return program


class _ConstantChanged(CodegenError):
    """A constant file program.json names is missing or differs (maybe a recompile's doing)."""


def _read_program_json(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_PROGRAM_BYTES + 1)
    except OSError as exc:
        raise CodegenError(f"{path} cannot be read ({exc.strerror or exc}); recompile") from None
    if len(raw) > MAX_PROGRAM_BYTES:
        raise CodegenError(f"{path} is larger than {MAX_PROGRAM_BYTES} bytes "
                           "(MAX_PROGRAM_BYTES); it was not written by Context.compile")
    return raw


def _check_fits(program: DeviceProgram, path: Path) -> None:
    """Refuse a program whose buffers, or any one value it computes, exceed the chip's DRAM:
    it could not run on the device, and running it here would ask the host for that much."""
    arch = program.arch
    capacity = arch.groups * arch.dram_bytes_per_group
    buffers = sum(layout.nbytes for layout in program.layouts.values())
    buffers += sum(layout.nbytes for layout in program.output_layouts.values())
    if buffers > capacity:
        raise CodegenError(f"{path}: the program's inputs, outputs and constants take "
                           f"{buffers} bytes of DRAM; the chip has {capacity} "
                           f"({arch.groups} Groups of {arch.dram_bytes_per_group}); recompile")
    for name, ttype in program.graph.value_types().items():
        size = ttype.numel * ttype.torch_dtype.itemsize
        if buffers + size > capacity:
            raise CodegenError(f"{path}: value %{name} ({ttype}) takes {size} bytes, beside "
                               f"{buffers} bytes of buffers; the chip's DRAM holds "
                               f"{capacity}; recompile")


def codegen_files(root: Path) -> set[str]:
    """The files (relative paths) the program in ``root`` consists of, as its program.json
    names them: empty when there is no readable program there. Never follows what the JSON
    says outside ``constants/``."""
    try:
        body = json.loads((root / _PROGRAM_FILE).read_bytes().decode())
        rels = {entry["file"] for entry in body["constants"]}
    except (*_PARSE_ERRORS, UnicodeDecodeError):
        return set()
    if not all(isinstance(rel, str) and _safe_rel(rel) for rel in rels):
        return set()
    return rels | {_PROGRAM_FILE, _TEXT_FILE}


@contextlib.contextmanager
def replacing_program(root: Path) -> Iterator[set[str]]:
    """Replace the program in codegen directory ``root`` (created if needed).

    The caller writes the new program's files through temporary names and renames (constants
    under content names, ``program.json`` last) and adds each one's relative path to the set
    this yields. On a normal exit the previous program's files that the new one does not use
    are removed, with files nothing names that are older than an hour and temporaries of
    writers that died. Raises CodegenError when ``root/constants`` is not a plain directory.
    """
    root.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(root / "constants"):
        _constants_dir(root)
    previous = codegen_files(root)
    written: set[str] = set()
    yield written
    _tidy(root, previous - written, written | previous)


def _constants_dir(root: Path) -> Path:
    """``root/constants``, created if needed; CodegenError when it is a symlink or a file."""
    constants = root / "constants"
    with contextlib.suppress(FileExistsError):
        constants.mkdir()
    if constants.is_symlink() or not constants.is_dir():
        raise CodegenError(f"{str(constants)!r} is not a plain directory (a symlink, or a "
                           "file); it would make the compile write elsewhere. Remove it, or "
                           "choose another codegen directory")
    return constants


def _tidy(root: Path, drop: set[str], keep: set[str]) -> None:
    limit = time.time() - STALE_SECONDS
    for rel in drop:
        with contextlib.suppress(OSError):
            (root / rel).unlink()
    for folder in (root, root / "constants"):
        with contextlib.suppress(OSError), os.scandir(folder) as items:
            for item in items:
                rel = os.path.relpath(item.path, root)
                if rel in keep or not item.is_file(follow_symlinks=False):
                    continue
                if _stale(item, limit, orphan=folder != root or rel.endswith(".tmp")):
                    with contextlib.suppress(OSError):
                        os.unlink(item.path)


def _stale(item: os.DirEntry[str], limit: float, orphan: bool) -> bool:
    """A temporary of a writer that died (its pid gone, or an hour old), or (``orphan``) a
    constant file nothing names for an hour (left by a kill between constants and
    program.json)."""
    if item.name.startswith(".") and item.name.endswith(".tmp"):
        return is_stale_temporary(Path(item.path)) or item.stat().st_mtime < limit
    return orphan and item.name.endswith(".npy") and item.stat().st_mtime < limit


def body_checksum(body: dict[str, Any]) -> str:
    """The ``sha256`` that ``program.json`` stores: the SHA-256 of the rest of its body as
    canonical JSON (keys sorted, no spaces). ``body`` must not hold ``"sha256"`` itself."""
    return hashlib.sha256(canonical_json(body)).hexdigest()


def _safe_rel(rel: str) -> bool:
    # Content names, and the index names programs of earlier saves used.
    return bool(re.fullmatch(r"constants/(?:[0-9a-f]{64}|\d{4})\.npy", rel))


def _state_entry(state: Any, graph: Graph) -> dict[str, str]:
    """The ``state`` entry of program.json, checked: constant name -> registered name."""
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in state.items()):
        raise ValueError(f"'state' must map constant names to registered names, not {state!r}")
    unknown = sorted(set(state) - set(graph.constants))
    if unknown:
        raise ValueError(f"'state' names {unknown}, which are not constants of the graph")
    return dict(state)


def _writes_entry(writes: Any, graph: Graph) -> dict[str, str]:
    """The ``state_writes`` entry of program.json, checked: registered name -> graph output."""
    if not isinstance(writes, list):
        raise ValueError(f"'state_writes' must be a list, not {type(writes).__name__}")
    result = {}
    for entry in writes:
        registered, out = entry["registered"], entry["name"]
        if not isinstance(registered, str) or out not in graph.outputs:
            raise ValueError(f"'state_writes' entry {entry!r} names no output of the graph")
        result[registered] = out
    return result
