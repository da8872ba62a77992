"""The compile driver: capture -> :data:`~mncore_compiler.passes.PIPELINE` -> DeviceProgram,
for one :class:`~mncore_compiler.request.CompileRequest`.

:func:`compile_function` is :func:`capture_request` followed by :func:`compile_captured`;
callers that need the captured graph first (the SDK's compile cache keys on it) call the two
steps themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from .capture import Captured, capture, capture_step
from .errors import CompilerError
from .passes import Compilation, run_pipeline
from .program import DeviceProgram
from .request import CompileRequest

__all__ = ["CompileRequest", "capture", "capture_request", "capture_step", "compile_captured",
           "compile_function", "function_name", "to_program"]


def compile_function(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
                     request: CompileRequest | None = None) -> DeviceProgram:
    """Compile a dict -> dict torch function into a device program.

    Parameters
    ----------
    fn : callable
        The function; see :func:`mncore_compiler.capture.capture`.
    sample_inputs : dict of str to torch.Tensor
        Example inputs.
    request : CompileRequest, optional
        What to compile for and with (:mod:`mncore_compiler.request`); by default the
        defaults, named after ``fn``.
    """
    if request is None:
        request = CompileRequest(name=function_name(fn))
    return compile_captured(capture_request(fn, sample_inputs, request), request)


def capture_request(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
                    request: CompileRequest) -> Captured:
    """:func:`~mncore_compiler.capture.capture_step` with the request's ``float_dtype``,
    ``registered`` and ``training``."""
    return capture_step(fn, sample_inputs, float_dtype=request.float_dtype,
                        registered=request.registered, training=request.training)


def compile_captured(captured: Captured, request: CompileRequest) -> DeviceProgram:
    """Run the pass pipeline on a captured function (not modified) and package the result."""
    return to_program(run_pipeline(Compilation(captured.graph, request)), captured)


def function_name(fn: Callable[..., Any]) -> str:
    """The program name :func:`compile_function` gives ``fn`` by default: its ``__name__``."""
    return str(getattr(fn, "__name__", "function"))


def to_program(compilation: Compilation, captured: Captured) -> DeviceProgram:
    """Package the result of :func:`~mncore_compiler.passes.run_pipeline` as a DeviceProgram,
    named and recording the options of its request, with ``captured``'s state.

    Raises
    ------
    ValueError
        When the pipeline that produced ``compilation`` assigned no layouts.
    """
    graph, plan = compilation.graph, compilation.layout_plan()
    request = compilation.request
    # Constants dead-code elimination dropped are not read, so not state either.
    state = {c: r for c, r in captured.state.items() if c in graph.constants}
    writes = dict(captured.state_writes)
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
        name=request.name,
        graph=graph,
        layouts=plan.values(),
        output_layouts=output_layouts,
        inputs=tuple(graph.inputs),
        outputs=tuple(o for o in graph.outputs if o not in hidden),
        arch=request.config,
        options=dict(request.options),
        state=state,
        state_writes=writes,
    )
