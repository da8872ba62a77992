"""The compiler's pass pipeline: one ordered list of graph passes, verified after each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import IRVerificationError
from ..ir import Graph
from .dce import DeadCodeElimination
from .decompose import Decompose

__all__ = [
    "DEFAULT_PIPELINE",
    "CompileContext",
    "DeadCodeElimination",
    "Decompose",
    "Pass",
    "run_pipeline",
]


@dataclass
class CompileContext:
    """What passes share besides the graph.

    Parameters
    ----------
    options : dict
        Caller's settings, read by passes (e.g. ``"io_spec_constraints"``); free-form.
    state : dict
        Results passes leave for later passes and for code generation (e.g. ``"layouts"``).
        :func:`run_pipeline` appends each pass name to ``state["passes_run"]``.
    """

    options: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Pass(Protocol):
    """A graph-to-graph transformation.

    ``run`` returns the transformed graph; it must not modify the graph it is given (return a
    new one, e.g. from :meth:`Graph.copy`), so a failed pipeline leaves the caller's graph intact.
    """

    name: str

    def run(self, graph: Graph, ctx: CompileContext) -> Graph:
        """Return the transformed graph."""
        ...


DEFAULT_PIPELINE: tuple[Pass, ...] = (
    Decompose(),
    DeadCodeElimination(),
)
"""The passes :func:`run_pipeline` runs by default, in order."""


def run_pipeline(
    graph: Graph, ctx: CompileContext, pipeline: Sequence[Pass] | None = None
) -> Graph:
    """Verify ``graph``, then run each pass and verify its result.

    Parameters
    ----------
    graph : Graph
        The captured graph; it is not modified.
    ctx : CompileContext
        Shared options and state.
    pipeline : sequence of Pass, optional
        The passes to run, in order; :data:`DEFAULT_PIPELINE` when omitted.

    Returns
    -------
    Graph
        The graph after the last pass.

    Raises
    ------
    IRVerificationError
        When the input graph, or the graph a pass returns, breaks an IR invariant; the
        message names the pass.
    TypeError
        When a pipeline entry is not a :class:`Pass` or a pass returns something else.
    """
    passes = list(DEFAULT_PIPELINE if pipeline is None else pipeline)
    for entry in passes:
        if not isinstance(entry, Pass):
            raise TypeError(
                f"pipeline entries must have a 'name' and a run(graph, ctx) method, not {entry!r}"
            )
    graph.verify()
    log = ctx.state.setdefault("passes_run", [])
    for entry in passes:
        result = entry.run(graph, ctx)
        if not isinstance(result, Graph):
            raise TypeError(f"pass {entry.name!r} returned {type(result).__name__}, not a Graph")
        try:
            result.verify()
        except IRVerificationError as exc:
            raise IRVerificationError(f"after pass {entry.name!r}: {exc}") from exc
        log.append(entry.name)
        graph = result
    return graph
