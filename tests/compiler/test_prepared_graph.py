"""PreparedGraph: what it settles once (equal nodes merged, values dropped after their last
use, constant-only values kept between calls) never changes a result."""

from __future__ import annotations

import torch
from mncore_compiler.interpreter import PreparedGraph, interpret
from mncore_compiler.ir import Graph, Node, TensorType


def t(*shape: int) -> TensorType:
    return TensorType(tuple(shape), "float32")


def scaled_graph() -> Graph:
    """y = x * (c * 2 + 1) + x * (c * 2 + 1) @ w^T: constant-only nodes (the scale, the
    transposed weight), written twice (equal nodes), and an input-dependent rest."""
    return Graph(
        inputs={"x": t(4, 3)},
        constants={"c": torch.full((3,), 0.5), "w": torch.eye(3)},
        nodes=[
            Node("s", "mul_scalar", ("c",), {"scalar": 2.0}, t(3)),
            Node("s1", "add_scalar", ("s",), {"scalar": 1.0}, t(3)),
            Node("again", "mul_scalar", ("c",), {"scalar": 2.0}, t(3)),
            Node("again1", "add_scalar", ("again",), {"scalar": 1.0}, t(3)),
            Node("wt", "permute", ("w",), {"dims": (1, 0)}, t(3, 3)),
            Node("a", "mul", ("x", "s1"), {}, t(4, 3)),
            Node("b", "mul", ("x", "again1"), {}, t(4, 3)),
            Node("m", "matmul", ("b", "wt"), {}, t(4, 3)),
            Node("y", "add", ("a", "m"), {}, t(4, 3)),
        ],
        outputs={"y": "y", "scale": "again1"},
    )


def expected(x: torch.Tensor, c: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    scale = c * 2 + 1
    return x * scale + (x * scale) @ w.t()


def test_equal_nodes_are_computed_once_and_negative_zero_stays_apart() -> None:
    graph = scaled_graph()
    prepared = PreparedGraph(graph)
    # again and again1 are s and s1, so b (x * again1) is a (x * s1): three merged
    assert len(prepared._checked_steps) == len(graph.nodes) - 3
    zeros = Graph(
        inputs={"x": t(2)},
        nodes=[Node("p", "mul_scalar", ("x",), {"scalar": 0.0}, t(2)),
               Node("n", "mul_scalar", ("x",), {"scalar": -0.0}, t(2))],
        outputs={"p": "p", "n": "n"},
    )
    out = interpret(zeros, {"x": torch.tensor([1.0, -1.0])})
    assert torch.equal(out["p"].signbit(), torch.tensor([False, True]))
    assert torch.equal(out["n"].signbit(), torch.tensor([True, False]))


def test_kept_constant_values_follow_every_change_of_the_constants() -> None:
    graph = scaled_graph()
    prepared = PreparedGraph(graph)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(3))
    c, w = torch.full((3,), 0.5), torch.randn(3, 3, generator=torch.Generator().manual_seed(4))
    for _ in range(3):  # the first run, then kept values
        got = prepared({"x": x}, constants={"c": c, "w": w})
        assert torch.equal(got["y"], expected(x, c, w))
    c.mul_(3)  # changed in place: its version counter says so
    assert torch.equal(prepared({"x": x}, constants={"c": c, "w": w})["y"], expected(x, c, w))
    w2 = w.clone() + 1  # another tensor
    got = prepared({"x": x}, constants={"c": c, "w": w2})
    assert torch.equal(got["y"], expected(x, c, w2))
    # The graph's own constants when none are given; the outputs are copies.
    got = prepared({"x": x})
    assert torch.equal(got["y"], expected(x, *graph.constants.values()))
    got["scale"].zero_()
    assert torch.equal(prepared({"x": x})["scale"], torch.full((3,), 2.0))


def test_values_are_dropped_after_their_last_use() -> None:
    seen: list = []
    graph = Graph(
        inputs={"x": t(3)},
        nodes=[Node("a", "add_scalar", ("x",), {"scalar": 1.0}, t(3)),
               Node("b", "mul_scalar", ("a",), {"scalar": 2.0}, t(3)),
               Node("c", "relu", ("b",), {}, t(3))],
        outputs={"c": "c"},
    )
    prepared = PreparedGraph(graph)
    frees = {step[4]: step[5] for step in prepared._steps}  # slot -> slots freed after it
    slot_a, slot_b, slot_c = (step[4] for step in prepared._steps)
    assert frees == {slot_a: (0,), slot_b: (slot_a,), slot_c: (slot_b,)}
    for _ in range(2):
        seen.append(prepared({"x": torch.tensor([-2.0, 0.0, 1.0])})["c"])
    assert all(torch.equal(s, torch.tensor([0.0, 2.0, 4.0])) for s in seen)


def test_constants_that_change_every_call_stop_being_kept() -> None:
    """A training step's state changes on every call: after two calls in a row that recompute
    the constant-only values, nothing is kept and the steps run in graph order, with the
    same results."""
    graph = scaled_graph()
    prepared = PreparedGraph(graph)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(5))
    w = torch.eye(3)
    for step in range(5):
        c = torch.full((3,), float(step))  # a new tensor every call
        assert torch.equal(prepared({"x": x}, constants={"c": c, "w": w})["y"],
                           expected(x, c, w))
        assert bool(prepared._early) == (step < 2)
    assert prepared._memo is None
    still = PreparedGraph(graph)  # the same constants every call: kept throughout
    for _ in range(5):
        still({"x": x}, constants={"c": c, "w": w})
    assert still._early and still._memo is not None
