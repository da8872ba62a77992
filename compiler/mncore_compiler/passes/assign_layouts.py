"""Layout assignment as a pass: every IO and constant gets its DRAM layout."""

from __future__ import annotations

from dataclasses import replace

from ..layouts import assign_layouts
from .compilation import Compilation

__all__ = ["assign_layouts_pass"]


def assign_layouts_pass(compilation: Compilation) -> Compilation:
    """The pipeline step: :func:`~mncore_compiler.layouts.assign_layouts` honouring the
    options' ``io_spec_constraints``, for the options' chip."""
    options = compilation.options
    plan = assign_layouts(compilation.graph, options.constraints, options.config)
    return replace(compilation, layouts=plan)
