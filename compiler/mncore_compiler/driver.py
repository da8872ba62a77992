"""The compile driver: capture -> :data:`~mncore_compiler.passes.PIPELINE` -> DeviceProgram.

:func:`compile_function` is :func:`~mncore_compiler.capture.capture` followed by
:func:`compile_graph`; callers that need the captured graph first (the SDK's compile cache keys
on it) call the two steps themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout

from .capture import capture
from .ir import Graph
from .passes import Compilation, CompileOptions, run_pipeline
from .program import DeviceProgram

__all__ = ["capture", "compile_function", "compile_graph", "function_name", "to_program"]


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
    return compile_graph(graph, constraints=constraints, config=config, options=options,
                         name=name or function_name(fn))


def compile_graph(graph: Graph, *, constraints: Mapping[str, Layout] | None = None,
                  config: ArchConfig = MNCORE2, options: Mapping[str, Any] | None = None,
                  name: str = "function") -> DeviceProgram:
    """Run the pass pipeline on a captured graph and package the result.

    Parameters
    ----------
    graph : Graph
        What :func:`~mncore_compiler.capture.capture` returned (not modified).
    constraints, config, options
        As for :func:`compile_function`.
    name : str
        Program name.
    """
    start = Compilation(graph, CompileOptions(dict(constraints or {}), config))
    return to_program(run_pipeline(start), name, options)


def function_name(fn: Callable[..., Any]) -> str:
    """The program name :func:`compile_function` gives ``fn`` by default: its ``__name__``."""
    return str(getattr(fn, "__name__", "function"))


def to_program(compilation: Compilation, name: str,
               options: Mapping[str, Any] | None = None) -> DeviceProgram:
    """Package the result of :func:`~mncore_compiler.passes.run_pipeline` as a DeviceProgram.

    Raises
    ------
    ValueError
        When the pipeline that produced ``compilation`` assigned no layouts.
    """
    graph, plan = compilation.graph, compilation.layout_plan()
    return DeviceProgram(
        name=name,
        graph=graph,
        layouts=plan.values(),
        output_layouts=dict(plan.outputs),
        inputs=tuple(graph.inputs),
        outputs=tuple(graph.outputs),
        arch=compilation.options.config,
        options=dict(options or {}),
    )
