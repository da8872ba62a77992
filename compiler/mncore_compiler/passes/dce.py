"""Dead-code elimination: drop nodes and constants no output depends on."""

from __future__ import annotations

from ..ir import Graph

__all__ = ["eliminate_dead_code", "live_values"]


def live_values(graph: Graph) -> set[str]:
    """Return the names of every value some output depends on (outputs included)."""
    live = set(graph.outputs.values())
    for node in reversed(graph.nodes):
        if node.name in live:
            live.update(node.operands)
    return live


def eliminate_dead_code(graph: Graph) -> Graph:
    """Return ``graph`` without the nodes no output needs and the constants no one reads.

    Inputs always stay: they are the function's signature, even when unused. ``graph`` itself
    is not modified.
    """
    live = live_values(graph)
    result = graph.copy()
    result.nodes = [node for node in graph.nodes if node.name in live]
    result.constants = {n: t for n, t in graph.constants.items() if n in live}
    return result
