"""Decomposition: rewrite composite IR ops into the smaller set the device executes."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph, GraphBuilder, Node

__all__ = ["Rule", "decompose", "rewrite"]

Rule = Callable[[GraphBuilder, Node], None]
"""``rule(builder, node)``: emit ``node``'s replacement through ``builder``; its last node
takes ``node.name``, so that its users and the graph's outputs need no renaming."""


def rewrite(graph: Graph, rules: dict[str, Rule]) -> Graph:
    """Rebuild ``graph`` node by node: copy each node, or let ``rules[node.op]`` replace it.

    The nodes a rule adds before its last one get fresh names (never one of ``graph``'s).
    ``graph`` itself is not modified.
    """
    result = graph.copy()
    result.nodes = []
    builder = GraphBuilder(result, reserved=graph.value_types())
    for node in graph.nodes:
        rule = rules.get(node.op)
        if rule is None:
            builder.append(node)
        else:
            rule(builder, node)
    return result


def _addmm(rw: GraphBuilder, node: Node) -> None:
    # addmm(bias, a, b) = beta * bias + alpha * (a @ b); torch ignores bias when beta == 0.
    bias, a, b = node.operands
    alpha, beta = node.attrs["alpha"], node.attrs["beta"]
    last_is_matmul = beta == 0 and alpha == 1
    product = rw.emit("matmul", [a, b], node.name if last_is_matmul else None)
    if alpha != 1:
        product = rw.emit("mul_scalar", [product], node.name if beta == 0 else None, scalar=alpha)
    if beta == 0:
        return
    if beta != 1:
        bias = rw.emit("mul_scalar", [bias], scalar=beta)
    rw.emit("add", [product, bias], node.name)


def _explicit_casts(rw: GraphBuilder, node: Node) -> None:
    # Mixed-dtype operands are promoted by torch; make that a cast so every compute op
    # sees operands of its result dtype.
    operands = [
        o if rw.type(o).dtype == node.type.dtype else rw.emit("cast", [o], dtype=node.type.dtype)
        for o in node.operands
    ]
    rw.emit(node.op, operands, node.name, **node.attrs)


_RULES: dict[str, Rule] = {
    "addmm": _addmm,
    "add": _explicit_casts,
    "sub": _explicit_casts,
    "mul": _explicit_casts,
    "div": _explicit_casts,
    "cat": _explicit_casts,
}


def decompose(graph: Graph) -> Graph:
    """Lower ``addmm`` to ``matmul`` + ``mul_scalar``/``add``, and make implicit dtype
    promotion of ``add``/``sub``/``mul``/``div``/``cat`` operands explicit ``cast`` nodes.

    ``softmax``, ``log_softmax``, ``gelu`` and ``mean`` stay single ops: the device executes
    them as such. ``graph`` itself is not modified.
    """
    return rewrite(graph, _RULES)
