"""What passes exchange: :class:`Compilation` (graph, request, layouts) and the :class:`Pass`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..ir import Graph
from ..layouts import LayoutPlan
from ..request import CompileRequest

__all__ = ["CompileRequest", "Compilation", "Pass", "PassRecord", "graph_pass"]


@dataclass(frozen=True)
class PassRecord:
    """What one pass of a :func:`run_pipeline` run took.

    Parameters
    ----------
    name : str
        The pass.
    seconds : float
        Time spent in the pass itself.
    verify_seconds : float
        Time spent verifying the graph it returned.
    """

    name: str
    seconds: float
    verify_seconds: float


@dataclass(frozen=True)
class Compilation:
    """The value passes exchange.

    Parameters
    ----------
    graph : Graph
        The IR; a pass that changes it puts a new graph here (never modifies the old one).
    request : CompileRequest
        The caller's settings (:mod:`mncore_compiler.request`); passes read them.
    layouts : LayoutPlan or None
        The DRAM layout of every IO and constant, once the ``assign-layouts`` pass ran.
    history : tuple of PassRecord
        The passes run so far, in order, with their timings (filled by :func:`run_pipeline`).
    """

    graph: Graph
    request: CompileRequest = field(default_factory=CompileRequest)
    layouts: LayoutPlan | None = None
    history: tuple[PassRecord, ...] = ()

    @property
    def passes_run(self) -> list[str]:
        """Names of the passes run so far, in order."""
        return [record.name for record in self.history]

    def layout_plan(self) -> LayoutPlan:
        """Return :attr:`layouts`; ``ValueError`` when no pass has assigned them."""
        if self.layouts is None:
            raise ValueError(
                f"no layouts assigned: the pipeline must include the 'assign-layouts' pass "
                f"(passes run: {self.passes_run})"
            )
        return self.layouts


@dataclass(frozen=True)
class Pass:
    """One named step of the pipeline: a function from :class:`Compilation` to Compilation.

    Parameters
    ----------
    name : str
        Used in :attr:`Compilation.history` and in verification errors.
    run : callable
        ``run(compilation) -> Compilation``; it must not modify the graph it is given.
    """

    name: str
    run: Callable[[Compilation], Compilation]


def graph_pass(name: str, rewrite: Callable[[Graph], Graph]) -> Pass:
    """Return a :class:`Pass` that replaces the graph with ``rewrite(graph)``."""

    def run(compilation: Compilation) -> Compilation:
        return replace(compilation, graph=rewrite(compilation.graph))

    return Pass(name, run)
