"""Dead-code elimination: drop nodes and constants no output depends on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import Graph

if TYPE_CHECKING:
    from . import CompileContext

__all__ = ["DeadCodeElimination", "live_values"]


def live_values(graph: Graph) -> set[str]:
    """Return the names of every value some output depends on (outputs included)."""
    live = set(graph.outputs.values())
    for node in reversed(graph.nodes):
        if node.name in live:
            live.update(node.operands)
    return live


class DeadCodeElimination:
    """Remove nodes whose results no output needs, and constants no node or output reads.

    Inputs always stay: they are the function's signature, even when unused.
    """

    name = "dce"

    def run(self, graph: Graph, ctx: CompileContext) -> Graph:
        """Return ``graph`` without its dead nodes and constants."""
        live = live_values(graph)
        result = graph.copy()
        result.nodes = [node for node in graph.nodes if node.name in live]
        result.constants = {n: t for n, t in graph.constants.items() if n in live}
        return result
