"""Layout assignment as a pass: every IO and constant gets its DRAM layout."""

from __future__ import annotations

from dataclasses import replace

from ..layouts import assign_layouts
from .compilation import Compilation

__all__ = ["assign_layouts_pass"]


def assign_layouts_pass(compilation: Compilation) -> Compilation:
    """The pipeline step: :func:`~mncore_compiler.layouts.assign_layouts` honouring the
    request's ``io_spec_constraints`` (checked against the graph by
    :meth:`~mncore_compiler.request.CompileRequest.constraint_layouts`), for its chip."""
    request = compilation.request
    constraints = request.constraint_layouts(compilation.graph)
    plan = assign_layouts(compilation.graph, constraints, request.config)
    return replace(compilation, layouts=plan)
