"""Decomposition: rewrite composite IR ops into the smaller set the device executes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir import Graph, Node, fresh_name
from ..ops import infer_type

__all__ = ["GraphRewriter", "decompose"]


class GraphRewriter:
    """Rebuilds a graph node by node, letting a rule replace one node with several.

    A replacement's last node takes the replaced node's name, so its users and the graph's
    outputs need no renaming; the nodes before it get fresh names.
    """

    def __init__(self, graph: Graph):
        self.source = graph
        self.result = graph.copy()
        self.result.nodes = []
        self.taken = set(graph.value_types())

    def fresh(self, base: str) -> str:
        """Return an unused value name starting with ``base``."""
        return fresh_name(base, self.taken)

    def emit(self, op: str, operands: list[str], name: str | None = None, **attrs: Any) -> str:
        """Append ``op(operands, attrs)`` (named ``name`` or a fresh name) and return its name."""
        types = [self.result.type_of(o) for o in operands]
        result_type = infer_type(op, types, attrs)
        node = Node(name or self.fresh(op), op, tuple(operands), attrs, result_type)
        self.result.nodes.append(node)
        return node.name

    def type(self, name: str) -> str:
        """Return the dtype of a value already in the result graph."""
        return self.result.type_of(name).dtype

    def rewrite(self, rules: dict[str, Callable[[GraphRewriter, Node], None]]) -> Graph:
        """Copy each node, or call ``rules[node.op](self, node)`` to emit its replacement."""
        for node in self.source.nodes:
            rule = rules.get(node.op)
            if rule is None:
                self.result.nodes.append(node)
            else:
                rule(self, node)
        return self.result


def _addmm(rw: GraphRewriter, node: Node) -> None:
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


def _explicit_casts(rw: GraphRewriter, node: Node) -> None:
    # Mixed-dtype operands are promoted by torch; make that a cast so every compute op
    # sees operands of its result dtype.
    operands = [
        o if rw.type(o) == node.type.dtype else rw.emit("cast", [o], dtype=node.type.dtype)
        for o in node.operands
    ]
    rw.emit(node.op, operands, node.name, **node.attrs)


_RULES: dict[str, Callable[[GraphRewriter, Node], None]] = {
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
    return GraphRewriter(graph).rewrite(_RULES)
