"""The compiler's pass pipeline: :data:`PIPELINE`, every pass compilation runs, in order.

Passes exchange one typed value, :class:`Compilation` (the graph, the caller's
:class:`CompileOptions`, and the :class:`~mncore_compiler.layouts.LayoutPlan` once assigned).
:func:`run_pipeline` verifies the graph before the first pass and after each one, and records
what each pass took in :attr:`Compilation.history`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout

from ..errors import IRVerificationError
from ..ir import Graph
from ..layouts import LayoutPlan, assign_layouts
from .dce import eliminate_dead_code
from .decompose import decompose
from .precision import mixed_precision, mixed_precision_pass

__all__ = [
    "PIPELINE",
    "CompileOptions",
    "Compilation",
    "Pass",
    "PassRecord",
    "decompose",
    "eliminate_dead_code",
    "graph_pass",
    "mixed_precision",
    "run_pipeline",
]


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


def _assign_layouts(compilation: Compilation) -> Compilation:
    options = compilation.options
    plan = assign_layouts(compilation.graph, options.constraints, options.config)
    return replace(compilation, layouts=plan)


PIPELINE: tuple[Pass, ...] = (
    graph_pass("decompose", decompose),
    graph_pass("dce", eliminate_dead_code),
    Pass("mixed-precision", mixed_precision_pass),
    Pass("assign-layouts", _assign_layouts),
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
