"""The pipeline plan's file: read back and checked for consistency before anything uses it.

A ``pipeline_plan.json`` is written by :meth:`mlsdk.pipeline.Pipeline.compile` and read by
people and tools (:func:`load_plan`, :func:`mlsdk.pipeline.format_plan`). Nothing seals it, so
:func:`check_plan` holds every field to the type and range the writer gives it and every edge
to the functions the plan declares; a failure is a :class:`~mlsdk.CodegenError` naming the
field, what it should be and what it is.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import CodegenError

__all__ = ["MAX_PLAN_BYTES", "check_plan", "load_plan"]

#: The largest plan file read (a thousand functions' plan is well under 1 MiB).
MAX_PLAN_BYTES = 16 << 20
_EDGE = re.compile(r"([^.]+)\.(.+) -> ([^.]+)\.(.+)", re.DOTALL)
_TOTALS = {"cycles": int, "converter_bytes": int}


def _fail(where: str, field: str, expected: str, found: Any) -> CodegenError:
    shown = repr(found)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return CodegenError(f"{where} is inconsistent: {field} must be {expected}, not {shown}; "
                        "recompile the pipeline")


def _get(where: str, table: Any, field: str, key: str, kind: type) -> Any:
    if not isinstance(table, dict) or key not in table:
        raise CodegenError(f"{where} is inconsistent: {field} has no {key!r} field; "
                           "recompile the pipeline")
    value: Any = table[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise _fail(where, f"{field}.{key}", f"a JSON {kind.__name__}", value)
    if kind is int and isinstance(value, int) and value < 0:
        raise _fail(where, f"{field}.{key}", "a non-negative int", value)
    return value


def _totals(where: str, table: Any, field: str, placed: bool = False) -> None:
    for key, kind in (_TOTALS | ({"placed_cycles": int} if placed else {})).items():
        _get(where, table, field, key, kind)


def check_plan(plan: Any, where: str = "the pipeline plan") -> None:
    """Check a plan (as :attr:`CompiledPipeline.plan <mlsdk.pipeline.CompiledPipeline>` or
    as read from its file): every field present with the writer's type and range, every
    edge between functions of the plan, naming each of them.

    Raises
    ------
    CodegenError
        Naming the first field that is missing, of another type, or refers to no function.
    """
    if not isinstance(plan, dict):
        raise _fail(where, "the plan", "a JSON object", plan)
    functions = _get(where, plan, "the plan", "functions", dict)
    for name, entry in functions.items():
        field = f"functions[{name!r}]"
        if not name or "." in name:
            raise _fail(where, f"the name of {field}", "a non-empty name without '.'", name)
        if _get(where, entry, field, "calls", int) < 1:
            raise _fail(where, f"{field}.calls", "a positive int", entry["calls"])
        _get(where, entry, field, "launch_cycles", int)
        for io, layout in _get(where, entry, field, "constraints", dict).items():
            if not isinstance(layout, str):
                raise _fail(where, f"{field}.constraints[{io!r}]", "a layout string", layout)
        if "codegen_dir" in entry:
            _get(where, entry, field, "codegen_dir", str)
    edges = _get(where, plan, "the plan", "edges", list)
    for index, edge in enumerate(edges):
        field = f"edges[{index}]"
        text = _get(where, edge, field, "edge", str)
        match = _EDGE.fullmatch(text)
        if match is None:
            raise _fail(where, f"{field}.edge", "'function.output -> function.input'", text)
        for fn in (match.group(1), match.group(3)):
            if fn not in functions:
                raise CodegenError(f"{where} is inconsistent: {field} ({text}) names function "
                                   f"{fn!r}, which the plan's functions {list(functions)[:8]} "
                                   "do not hold; recompile the pipeline")
        if _get(where, edge, field, "count", int) < 1:
            raise _fail(where, f"{field}.count", "a positive int", edge["count"])
        for key in ("src_layout", "dst_layout"):
            _get(where, edge, field, key, str)
        _totals(where, edge, field, placed="placed_cycles" in edge)
        if _get(where, edge, field, "relocation", bool) and edge["converter_bytes"]:
            raise _fail(where, f"{field}.converter_bytes", "0 for a relocation",
                        edge["converter_bytes"])
        for alt, row in enumerate(_get(where, edge, field, "alternatives", list)):
            _get(where, row, f"{field}.alternatives[{alt}]", "layout", str)
            _get(where, row, f"{field}.alternatives[{alt}]", "total_cycles", int)
    totals = _get(where, plan, "the plan", "totals", dict)
    negotiated = _get(where, totals, "totals", "negotiated", dict)
    _totals(where, negotiated, "totals.negotiated", placed="placed_cycles" in negotiated)
    _totals(where, _get(where, totals, "totals", "defaults", dict), "totals.defaults")
    for index, row in enumerate(_get(where, totals, "totals", "consumer_first", list)):
        field = f"totals.consumer_first[{index}]"
        _totals(where, row, field)
        for src, dst in _get(where, row, field, "follows", dict).items():
            if not isinstance(dst, str):
                raise _fail(where, f"{field}.follows[{src!r}]", "a port name", dst)


def load_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``pipeline_plan.json`` and return the plan, checked by :func:`check_plan`.

    Raises
    ------
    CodegenError
        When the file is missing, larger than :data:`MAX_PLAN_BYTES`, not JSON, or
        inconsistent (naming the field).
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise CodegenError(f"Cannot read the pipeline plan {str(path)!r}: "
                           f"{exc.strerror or exc}") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise CodegenError(f"The pipeline plan {str(path)!r} is larger than {MAX_PLAN_BYTES} "
                           "bytes (MAX_PLAN_BYTES); it was not written by Pipeline.compile")
    try:
        plan = json.loads(raw.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise CodegenError(f"The pipeline plan {str(path)!r} is not valid JSON ({what}); "
                           "recompile the pipeline") from None
    check_plan(plan, str(path))
    return plan
