"""The compile driver: capture -> passes (decompose, DCE, layout assignment) -> DeviceProgram."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout

from .capture import capture
from .layouts import AssignLayouts
from .passes import DEFAULT_PIPELINE, CompileContext, run_pipeline
from .program import DeviceProgram

__all__ = ["compile_function", "PIPELINE"]

#: Every pass compilation runs, in order.
PIPELINE = (*DEFAULT_PIPELINE, AssignLayouts())


def compile_function(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor], *,
                     float_dtype: str = "float32",
                     constraints: Mapping[str, Layout] | None = None,
                     config: ArchConfig = MNCORE2,
                     options: Mapping[str, Any] | None = None,
                     name: str | None = None) -> DeviceProgram:
    """Compile a dict -> dict torch function into a device program.

    Parameters
    ----------
    fn : callable
        The function; see :func:`mncore_compiler.capture.capture`.
    sample_inputs : dict of str to torch.Tensor
        Example inputs.
    float_dtype : str
        Compute precision.
    constraints : dict of str to Layout, optional
        IO name -> the layout that IO must have.
    config : ArchConfig
        The chip to compile for.
    options : dict, optional
        Recorded in the program as given.
    name : str, optional
        Program name; defaults to ``fn.__name__``.
    """
    graph = capture(fn, sample_inputs, float_dtype=float_dtype)
    ctx = CompileContext(options={"io_spec_constraints": dict(constraints or {}),
                                  "arch": config})
    graph = run_pipeline(graph, ctx, PIPELINE)
    plan = ctx.state["layouts"]
    return DeviceProgram(
        name=name or str(getattr(fn, "__name__", "function")),
        graph=graph,
        layouts=plan.values(),
        output_layouts=dict(plan.outputs),
        inputs=tuple(graph.inputs),
        outputs=tuple(graph.outputs),
        arch=config,
        options=dict(options or {}),
    )
