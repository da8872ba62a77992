"""The device program: what compilation produces, written to and reloaded from a codegen directory.

A codegen directory holds:

- ``program.json``: format name and version, the architecture config, the options, the IR
  graph, the layout and byte size of every input, output and constant, the FLOP count, and a
  SHA-256 of all of it plus every constant file (to detect corruption);
- ``constants/<index>.npy``: each constant's raw element bits, C order;
- ``program.txt``: the same program for people to read (IR and layouts).
"""

from __future__ import annotations

import hashlib
import json
import re
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
    """

    name: str
    graph: Graph
    layouts: dict[str, Layout]
    output_layouts: dict[str, Layout]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    arch: ArchConfig
    options: dict[str, Any] = field(default_factory=dict)

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
        """Write the program into ``directory`` (created if needed); return the JSON's path."""
        root = Path(directory)
        (root / "constants").mkdir(parents=True, exist_ok=True)
        constants = []
        digest = hashlib.sha256()
        for index, (name, tensor) in enumerate(self.graph.constants.items()):
            rel = f"constants/{index:04d}.npy"
            np.save(root / rel, to_bits(tensor), allow_pickle=False)
            entry = self._io_entry(name, TensorType.of(tensor))
            entry["file"] = rel
            entry["sha256"] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
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
            "graph": self.graph.to_json(),
        }
        digest.update(_canonical(body))
        body["sha256"] = digest.hexdigest()
        path = root / _PROGRAM_FILE
        path.write_text(json.dumps(body, indent=1) + "\n")
        (root / "program.txt").write_text(self.describe() + "\n")
        return path

    def describe(self) -> str:
        """The program as text: IO layouts and the IR."""
        lines = [f"program {self.name} ({PROGRAM_FORMAT} v{PROGRAM_VERSION}), "
                 f"{self.flops} flops"]
        for kind, names in (("input", self.inputs), ("output", self.outputs),
                            ("constant", self.constants)):
            for name in names:
                layout = self.layout_of(name, kind == "output")
                lines.append(f"  {kind:8} {name}: {layout.dtype} {layout} "
                             f"({layout.nbytes} B)")
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
            if hashlib.sha256(file.read_bytes()).hexdigest() != entry["sha256"]:
                raise CodegenError(f"Constant file {str(file)!r} is corrupt (checksum "
                                   "mismatch); recompile")
            bits = np.load(file, allow_pickle=False)
            constants[entry["name"]] = from_bits(bits, entry["dtype"])
        for entry in body["inputs"] + body["constants"]:
            layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        for entry in body["outputs"]:
            output_layouts[entry["name"]] = Layout.parse(entry["layout"], entry["dtype"])
        graph = Graph.from_json(body["graph"], constants)
        graph.verify()
        return cls(name=body["name"], graph=graph, layouts=layouts,
                   output_layouts=output_layouts,
                   inputs=tuple(e["name"] for e in body["inputs"]),
                   outputs=tuple(e["name"] for e in body["outputs"]),
                   arch=ArchConfig.from_dict(body["arch"]), options=body["options"])


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _safe_rel(rel: str) -> bool:
    return bool(re.fullmatch(r"constants/\d{4}\.npy", rel))
