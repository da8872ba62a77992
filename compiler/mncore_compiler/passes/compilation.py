"""What passes exchange: :class:`Compilation` (graph, options, layouts) and the :class:`Pass`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout

from ..ir import Graph
from ..layouts import LayoutPlan

__all__ = ["CompileOptions", "Compilation", "Pass", "PassRecord", "graph_pass"]


@dataclass(frozen=True)
class CompileOptions:
    """What the caller asks of compilation.

    Parameters
    ----------
    constraints : dict of str to Layout
        IO name -> the layout that IO must have (``io_spec_constraints``).
    config : ArchConfig
        The chip to compile for.
    float_dtype : str
        The caller's ``float_dtype``. Capture applies the uniform precisions; the
        ``mixed-precision`` pass acts on ``"mixed"`` (16-bit matmul operands, float32 rest).
    """

    constraints: Mapping[str, Layout] = field(default_factory=dict)
    config: ArchConfig = MNCORE2
    float_dtype: str = "float32"


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
    options : CompileOptions
        The caller's settings; passes read them.
    layouts : LayoutPlan or None
        The DRAM layout of every IO and constant, once the ``assign-layouts`` pass ran.
    history : tuple of PassRecord
        The passes run so far, in order, with their timings (filled by :func:`run_pipeline`).
    """

    graph: Graph
    options: CompileOptions = field(default_factory=CompileOptions)
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
