"""Pipelines: several functions, their hand-offs, and the layouts negotiated for them."""

from __future__ import annotations

from .negotiate import Edge, Port, Problem
from .planfile import MAX_PLAN_BYTES, check_plan, load_plan
from .planner import PLAN_FILE, CompiledPipeline, Pipeline, format_plan

__all__ = ["Pipeline", "CompiledPipeline", "PLAN_FILE", "Port", "Edge", "Problem",
           "format_plan", "check_plan", "load_plan", "MAX_PLAN_BYTES"]
