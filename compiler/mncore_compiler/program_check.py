"""The consistency check of a loaded ``program.json``: every field of the type the loader
expects, every name it refers to declared once, every table agreeing with the graph.

A checksum only proves that nobody edited the file without recomputing it; anyone can reseal
an edited file. So :func:`check_body` runs on the parsed JSON before anything is built from it,
and :func:`check_tables` on the parsed pieces before the program is handed to a runtime. Each
failure is a :class:`~mncore_compiler.errors.CodegenError` naming the field, what it should be
and what it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mncore_hdl.layout import Layout

from .errors import CodegenError
from .ir import Graph

__all__ = ["MAX_GRAPH_NODES", "MAX_NAME_LENGTH", "MAX_PROGRAM_BYTES", "check_body",
           "check_tables"]

#: The longest function, IO or registered name a program may hold.
MAX_NAME_LENGTH = 256
#: The most IR nodes a loaded program may hold (a GPT-2 training step has a few thousand):
#: loading is linear in them, about 0.1 ms a node, so this bounds a load to seconds.
MAX_GRAPH_NODES = 100_000
#: The largest program.json read (constants are files of their own).
MAX_PROGRAM_BYTES = 256 << 20
_IO_FIELDS = {"name": str, "shape": list, "dtype": str, "layout": str, "nbytes": int,
              "groups": int, "lw_per_group": int}
_TOP_FIELDS = {"name": str, "arch": dict, "options": dict, "flops": int, "inputs": list,
               "outputs": list, "constants": list, "state": dict, "state_writes": list,
               "graph": dict}
#: Fields programs saved before registered state existed do not have.
_OPTIONAL = ("state", "state_writes")


def _fail(path: Path | str, field: str, expected: str, found: Any) -> CodegenError:
    shown = repr(found)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return CodegenError(f"{path} is inconsistent: {field} must be {expected}, not {shown} "
                        f"({type(found).__name__}); recompile")


def _typed(path: Path | str, field: str, value: Any, kind: type) -> None:
    # bool is an int to Python, never to this format.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _fail(path, field, f"a JSON {kind.__name__}", value)


def _name(path: Path | str, field: str, value: Any) -> None:
    _typed(path, field, value, str)
    # Names are the user's dict keys: any printable text, but bounded.
    if not value or len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise _fail(path, field, f"a non-empty printable str of at most {MAX_NAME_LENGTH} "
                    "characters", value)


def check_body(body: Mapping[str, Any], path: Path | str) -> None:
    """Check the types of ``program.json``'s fields and that no IO table declares a name twice.

    Raises
    ------
    CodegenError
        Naming the first field that is missing or of another type than the loader expects.
    """
    for field, kind in _TOP_FIELDS.items():
        if field in _OPTIONAL and field not in body:
            continue
        if field not in body:
            raise CodegenError(f"{path} is inconsistent: it has no {field!r} field; recompile")
        _typed(path, field, body[field], kind)
    if not body["name"] or len(body["name"]) > MAX_NAME_LENGTH:
        raise _fail(path, "name", f"a non-empty str of at most {MAX_NAME_LENGTH} characters",
                    body["name"])
    nodes = body["graph"].get("nodes")
    if isinstance(nodes, list) and len(nodes) > MAX_GRAPH_NODES:
        raise CodegenError(f"{path} holds a graph of {len(nodes)} nodes, more than "
                           f"{MAX_GRAPH_NODES} (MAX_GRAPH_NODES); split the function")
    for key in body["options"]:
        _typed(path, "a key of options", key, str)
    for table in ("inputs", "outputs", "constants", "state_writes"):
        seen: set[str] = set()
        for index, entry in enumerate(body.get(table, [])):
            where = f"{table}[{index}]"
            _typed(path, where, entry, dict)
            fields = dict(_IO_FIELDS)
            if table == "constants":
                fields |= {"file": str, "sha256": str}
            if table == "state_writes":
                fields["registered"] = str
            for field, kind in fields.items():
                if field not in entry:
                    raise CodegenError(f"{path} is inconsistent: {where} has no {field!r} "
                                       "field; recompile")
                _typed(path, f"{where}.{field}", entry[field], kind)
            _name(path, f"{where}.name", entry["name"])
            if entry["name"] in seen:
                raise CodegenError(f"{path} is inconsistent: {table} declares "
                                   f"{entry['name']!r} twice; recompile")
            seen.add(entry["name"])
            for axis, extent in enumerate(entry["shape"]):
                if isinstance(extent, bool) or not isinstance(extent, int) or extent < 0:
                    raise _fail(path, f"{where}.shape[{axis}]", "a non-negative int", extent)
    for key, value in body.get("state", {}).items():
        _typed(path, f"state[{key!r}]", value, str)


def _same_names(path: Path | str, field: str, declared: Any, graph_names: Any,
                what: str) -> None:
    if list(declared) != list(graph_names):
        raise CodegenError(f"{path} is inconsistent: {field} declares {list(declared)}, but "
                           f"the graph's {what} are {list(graph_names)}; recompile")


def _check_layout(path: Path | str, field: str, entry: Mapping[str, Any], layout: Layout,
                  shape: tuple[int, ...], dtype: str) -> None:
    if tuple(layout.shape) != tuple(shape) or layout.dtype != dtype:
        raise CodegenError(f"{path} is inconsistent: {field}'s layout {layout} is for "
                           f"{layout.dtype} {tuple(layout.shape)}, but the graph's value is "
                           f"{dtype} {tuple(shape)}; recompile")
    stored = (tuple(entry["shape"]), entry["dtype"], entry["nbytes"], entry["groups"],
              entry["lw_per_group"])
    derived = (tuple(shape), dtype, layout.nbytes, layout.groups, layout.lw_per_group)
    if stored != derived:
        raise CodegenError(f"{path} is inconsistent: {field} says (shape, dtype, nbytes, "
                           f"groups, lw_per_group) = {stored}, its layout gives {derived}; "
                           "recompile")


def check_tables(body: Mapping[str, Any], graph: Graph, layouts: Mapping[str, Layout],
                 output_layouts: Mapping[str, Layout], flops: int, path: Path | str) -> None:
    """Check that ``program.json``'s IO tables, as parsed, agree with its graph.

    The inputs are the graph's inputs in order, the constants its constants, the outputs and
    the state writes together its outputs (neither naming one twice), each entry's layout is
    for the graph's shape and dtype of that value, and ``flops`` is the graph's count.

    Raises
    ------
    CodegenError
        Naming the table and the names that disagree.
    """
    inputs = [e["name"] for e in body["inputs"]]
    constants = [e["name"] for e in body["constants"]]
    outputs = [e["name"] for e in body["outputs"]]
    write_entries = body.get("state_writes", [])
    writes = [e["name"] for e in write_entries]
    _same_names(path, "inputs", inputs, graph.inputs, "inputs")
    _same_names(path, "constants", constants, graph.constants, "constants")
    both = set(outputs) & set(writes)
    if both:
        raise CodegenError(f"{path} is inconsistent: {sorted(both)} are both outputs and "
                           "state_writes; recompile")
    _same_names(path, "outputs + state_writes", outputs + writes, graph.outputs, "outputs")
    registered = [e["registered"] for e in write_entries]
    if len(set(registered)) != len(registered):
        raise CodegenError(f"{path} is inconsistent: state_writes update a registered "
                           f"tensor twice ({registered}); recompile")
    types = graph.value_types()
    for table, names, table_layouts in (("inputs", inputs, layouts),
                                        ("constants", constants, layouts),
                                        ("outputs", outputs, output_layouts),
                                        ("state_writes", writes, output_layouts)):
        for index, name in enumerate(names):
            value = graph.outputs[name] if table in ("outputs", "state_writes") else name
            ttype = types[value]
            entries = write_entries if table == "state_writes" else body[table]
            _check_layout(path, f"{table}[{index}] ({name!r})", entries[index],
                          table_layouts[name], ttype.shape, ttype.dtype)
    if body["flops"] != flops:
        raise _fail(path, "flops", f"the graph's count, {flops}", body["flops"])
