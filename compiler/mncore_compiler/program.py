"""The device program: what compilation produces, written to and reloaded from a codegen directory.

A codegen directory holds:

- ``program.json``: format name and version, the architecture config, the options, the IR
  graph, the layout and byte size of every input, output and constant, the FLOP count, which
  constants are registered module state (``state``), and a SHA-256 of all of it plus every
  constant file (to detect corruption);
- ``constants/<index>.npy``: each constant's raw element bits, C order;
- ``program.txt``: the same program for people to read (IR and layouts).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import Layout, from_bits, to_bits

from .errors import CodegenError
from .ir import Graph, TensorType
from .ops import get_op

__all__ = ["DeviceProgram", "PROGRAM_FORMAT", "PROGRAM_VERSION", "graph_flops"]

PROGRAM_FORMAT = "mncore-cosim-program"
PROGRAM_VERSION = 1
_PROGRAM_FILE = "program.json"


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
        and ``program.json`` last, so a reader never sees a partly written file: it finds the
        previous program or the new one. Raises CodegenError, naming the path, when the
        directory cannot be written.
        """
        root = Path(directory)
        try:
            return self._save(root)
        except OSError as exc:
            where = exc.filename if exc.filename is not None else root
            raise CodegenError(
                f"Cannot write the codegen directory {str(root)!r}: {where}: "
                f"{exc.strerror or exc}; choose a writable directory"
            ) from None

    def _save(self, root: Path) -> Path:
        (root / "constants").mkdir(parents=True, exist_ok=True)
        constants = []
        digest = hashlib.sha256()
        for index, (name, tensor) in enumerate(self.graph.constants.items()):
            rel = f"constants/{index:04d}.npy"
            stream = io.BytesIO()
            np.save(stream, to_bits(tensor), allow_pickle=False)
            raw = stream.getvalue()
            _atomic_write(root / rel, raw)
            entry = self._io_entry(name, TensorType.of(tensor))
            entry["file"] = rel
            entry["sha256"] = hashlib.sha256(raw).hexdigest()
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
        digest.update(_canonical(body))
        body["sha256"] = digest.hexdigest()
        path = root / _PROGRAM_FILE
        _atomic_write(root / "program.txt", (self.describe() + "\n").encode())
        _atomic_write(path, (json.dumps(body, indent=1) + "\n").encode())
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
        """Read a program back; CodegenError says what is missing, stale or corrupt."""
        root = Path(directory)
        path = root / _PROGRAM_FILE
        if not root.is_dir():
            raise CodegenError(f"Codegen directory {str(root)!r} does not exist; compile the "
                               "function into it first")
        if not path.is_file():
            raise CodegenError(f"Codegen directory {str(root)!r} holds no {_PROGRAM_FILE}; "
                               "it was not written by Context.compile")
        try:
            body = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CodegenError(f"{path} is corrupt (not valid JSON: {exc}); recompile") from None
        if not isinstance(body, dict) or body.get("format") != PROGRAM_FORMAT:
            raise CodegenError(f"{path} is not an {PROGRAM_FORMAT} file; recompile")
        if body.get("version") != PROGRAM_VERSION:
            raise CodegenError(
                f"{path} is format version {body.get('version')!r}; this kit reads version "
                f"{PROGRAM_VERSION}. Recompile the function with this kit."
            )
        try:
            return cls._from_body(root, body)
        except CodegenError:
            raise
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise CodegenError(f"{path} is corrupt ({type(exc).__name__}: {exc}); "
                               "recompile") from None

    @classmethod
    def _from_body(cls, root: Path, body: dict[str, Any]) -> DeviceProgram:
        stored = body.pop("sha256", None)
        if hashlib.sha256(_canonical(body)).hexdigest() != stored:
            raise CodegenError(f"{root / _PROGRAM_FILE} is corrupt (checksum mismatch); "
                               "recompile")
        layouts: dict[str, Layout] = {}
        output_layouts: dict[str, Layout] = {}
        constants: dict[str, torch.Tensor] = {}
        for entry in body["constants"]:
            file = root / entry["file"]
            if not _safe_rel(entry["file"]) or not file.is_file():
                raise CodegenError(f"Constant file {str(file)!r} is missing; recompile")
            raw = file.read_bytes()  # read once: checksummed, then parsed from memory
            if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
                raise CodegenError(f"Constant file {str(file)!r} is corrupt (checksum "
                                   "mismatch); recompile")
            bits = np.load(io.BytesIO(raw), allow_pickle=False)
            constants[entry["name"]] = from_bits(bits, entry["dtype"])
        for entry in body["inputs"] + body["constants"]:
            layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        writes = body.get("state_writes", [])
        for entry in body["outputs"] + writes:
            output_layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        graph = Graph.from_json(body["graph"], constants)
        graph.verify()
        return cls(name=body["name"], graph=graph, layouts=layouts,
                   output_layouts=output_layouts,
                   inputs=tuple(e["name"] for e in body["inputs"]),
                   outputs=tuple(e["name"] for e in body["outputs"]),
                   arch=ArchConfig.from_dict(body["arch"]), options=body["options"],
                   state=_state_entry(body.get("state", {}), graph),
                   state_writes=_writes_entry(writes, graph))


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename
    (atomic on POSIX): the old content stays whole until the new one is complete."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the program from other users
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _safe_rel(rel: str) -> bool:
    return bool(re.fullmatch(r"constants/\d{4}\.npy", rel))


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
