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

from .capture import capture, capture_step
from .errors import CompilerError
from .ir import Graph
from .passes import Compilation, CompileOptions, run_pipeline
from .program import DeviceProgram

__all__ = ["capture", "capture_step", "compile_function", "compile_graph", "function_name",
           "to_program"]


def compile_function(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor], *,
                     float_dtype: str = "float32",
                     constraints: Mapping[str, Layout] | None = None,
                     config: ArchConfig = MNCORE2,
                     options: Mapping[str, Any] | None = None,
                     name: str | None = None,
                     registered: Mapping[int, str] | None = None,
                     training: bool | None = None) -> DeviceProgram:
    """Compile a dict -> dict torch function into a device program.

    Parameters
    ----------
    fn : callable
        The function; see :func:`mncore_compiler.capture.capture`.
    sample_inputs : dict of str to torch.Tensor
        Example inputs.
    float_dtype : str
        Compute precision: a key of :data:`~mncore_compiler.capture.FLOAT_DTYPES`
        (``"mixed"``: 16-bit matmul operands, float32 accumulation and everything else).
    constraints : dict of str to Layout, optional
        IO name -> the layout that IO must have.
    config : ArchConfig
        The chip to compile for.
    options : dict, optional
        Recorded in the program as given.
    name : str, optional
        Program name; defaults to ``fn.__name__``.
    registered : dict of int to str, optional
        ``id`` of each registered tensor -> its registered name: closed-over tensors found
        here become the program's :attr:`~DeviceProgram.state`.
    training : bool or None
        See :func:`~mncore_compiler.capture.capture_step`.
    """
    captured = capture_step(fn, sample_inputs, float_dtype=float_dtype, registered=registered,
                            training=training)
    return compile_graph(captured.graph, constraints=constraints, config=config,
                         options=options, name=name or function_name(fn),
                         float_dtype=float_dtype, state=captured.state,
                         state_writes=captured.state_writes)


def compile_graph(graph: Graph, *, constraints: Mapping[str, Layout] | None = None,
                  config: ArchConfig = MNCORE2, options: Mapping[str, Any] | None = None,
                  name: str = "function", float_dtype: str = "float32",
                  state: Mapping[str, str] | None = None,
                  state_writes: Mapping[str, str] | None = None) -> DeviceProgram:
    """Run the pass pipeline on a captured graph and package the result.

    Parameters
    ----------
    graph : Graph
        What :func:`~mncore_compiler.capture.capture` returned (not modified).
    constraints, config, options, float_dtype
        As for :func:`compile_function`.
    name : str
        Program name.
    state : dict of str to str, optional
        Constant name -> registered name, from :func:`~mncore_compiler.capture.capture_step`.
    state_writes : dict of str to str, optional
        Registered name -> graph output, from :func:`~mncore_compiler.capture.capture_step`.
    """
    start = Compilation(graph, CompileOptions(dict(constraints or {}), config,
                                              float_dtype=float_dtype))
    return to_program(run_pipeline(start), name, options, state, state_writes)


def function_name(fn: Callable[..., Any]) -> str:
    """The program name :func:`compile_function` gives ``fn`` by default: its ``__name__``."""
    return str(getattr(fn, "__name__", "function"))


def to_program(compilation: Compilation, name: str,
               options: Mapping[str, Any] | None = None,
               state: Mapping[str, str] | None = None,
               state_writes: Mapping[str, str] | None = None) -> DeviceProgram:
    """Package the result of :func:`~mncore_compiler.passes.run_pipeline` as a DeviceProgram.

    Raises
    ------
    ValueError
        When the pipeline that produced ``compilation`` assigned no layouts.
    """
    graph, plan = compilation.graph, compilation.layout_plan()
    # Constants dead-code elimination dropped are not read, so not state either.
    state = {c: r for c, r in (state or {}).items() if c in graph.constants}
    writes = dict(state_writes or {})
    output_layouts = dict(plan.outputs)
    read_as = {r: c for c, r in state.items()}
    for registered, out in writes.items():
        # Stored in the layout the program reads it in: the update is in place.
        if registered in read_as:
            layout = plan.values()[read_as[registered]]
            if layout.dtype != graph.type_of(graph.outputs[out]).dtype:
                raise CompilerError(
                    f"internal error: state {registered!r} is read as {layout.dtype} but "
                    f"updated as {graph.type_of(graph.outputs[out]).dtype}")
            output_layouts[out] = layout
    hidden = set(writes.values())
    return DeviceProgram(
        name=name,
        graph=graph,
        layouts=plan.values(),
        output_layouts=output_layouts,
        inputs=tuple(graph.inputs),
        outputs=tuple(o for o in graph.outputs if o not in hidden),
        arch=compilation.options.config,
        options=dict(options or {}),
        state=state,
        state_writes=writes,
    )
