"""The compiler's pass pipeline: :data:`PIPELINE`, every pass compilation runs, in order.

Passes exchange one typed value, :class:`Compilation` (the graph, the caller's
:class:`~mncore_compiler.request.CompileRequest`, and the
:class:`~mncore_compiler.layouts.LayoutPlan` once assigned).
:func:`run_pipeline` verifies the graph before the first pass and after each one, and records
what each pass took in :attr:`Compilation.history`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from ..errors import IRVerificationError
from ..ir import Graph
from .assign_layouts import assign_layouts_pass
from .compilation import Compilation, CompileRequest, Pass, PassRecord, graph_pass
from .dce import eliminate_dead_code
from .decompose import decompose
from .precision import mixed_precision, mixed_precision_pass

__all__ = [
    "PIPELINE",
    "Compilation",
    "CompileRequest",
    "Pass",
    "PassRecord",
    "assign_layouts_pass",
    "decompose",
    "eliminate_dead_code",
    "graph_pass",
    "mixed_precision",
    "run_pipeline",
]


PIPELINE: tuple[Pass, ...] = (
    graph_pass("decompose", decompose),
    graph_pass("dce", eliminate_dead_code),
    Pass("mixed-precision", mixed_precision_pass),
    Pass("assign-layouts", assign_layouts_pass),
)
"""Every pass compilation runs, in order."""


def run_pipeline(
    compilation: Compilation, pipeline: Sequence[Pass] = PIPELINE
) -> Compilation:
    """Verify the graph, then run each pass and verify the graph it returns.

    Parameters
    ----------
    compilation : Compilation
        The captured graph and the options; not modified.
    pipeline : sequence of Pass
        The passes to run, in order; :data:`PIPELINE` when omitted.

    Returns
    -------
    Compilation
        The value after the last pass, its :attr:`~Compilation.history` extended by one
        :class:`PassRecord` per pass.

    Raises
    ------
    IRVerificationError
        When the input graph, or the graph a pass returns, breaks an IR invariant; the
        message names the pass.
    TypeError
        When a pipeline entry is not a :class:`Pass` or a pass returns something else than a
        :class:`Compilation` holding a :class:`~mncore_compiler.ir.Graph`.
    """
    passes = list(pipeline)
    for entry in passes:
        if not isinstance(entry, Pass):
            raise TypeError(f"pipeline entries must be Pass(name, run), not {entry!r}")
    compilation.graph.verify()
    for entry in passes:
        start = time.perf_counter()
        result = entry.run(compilation)
        ran = time.perf_counter()
        if not isinstance(result, Compilation) or not isinstance(result.graph, Graph):
            got = type(result.graph if isinstance(result, Compilation) else result).__name__
            raise TypeError(
                f"pass {entry.name!r} returned {got}, not a Compilation holding a Graph"
            )
        try:
            result.graph.verify()
        except IRVerificationError as exc:
            raise IRVerificationError(f"after pass {entry.name!r}: {exc}") from exc
        record = PassRecord(entry.name, ran - start, time.perf_counter() - ran)
        compilation = replace(result, history=(*result.history, record))
    return compilation
