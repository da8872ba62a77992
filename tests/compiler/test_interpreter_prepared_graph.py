"""PreparedGraph (``mncore_compiler/interpreter.py``): what it settles once (equal nodes
merged, values dropped after their last use, constant-only values kept between calls) never
changes a result."""

from __future__ import annotations

import weakref

import pytest
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
    assert len(prepared.computed_nodes) == len(graph.nodes) - 3
    assert set(prepared.computed_nodes) == {"s", "s1", "wt", "a", "m", "y"}
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
    assert prepared.frees == {"a": ("x",), "b": ("a",), "c": ("b",)}
    for _ in range(2):
        Tracked.made.clear()
        x = torch.tensor([-2.0, 0.0, 1.0]).as_subclass(Tracked)
        seen.append(prepared({"x": x})["c"])
        # The generated code deleted a once b was computed: gone when relu runs.
        assert Tracked.alive_when_made[-1] == [False, True], Tracked.alive_when_made
    assert all(torch.equal(s, torch.tensor([0.0, 2.0, 4.0])) for s in seen)


class Tracked(torch.Tensor):
    """A tensor whose torch calls note which results made so far are still alive."""

    made: list = []
    alive_when_made: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[override]
        alive = [ref() is not None for ref in cls.made]
        result = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(result, torch.Tensor) and func.__name__ in ("add", "mul", "relu"):
            cls.made.append(weakref.ref(result))
            cls.alive_when_made.append(alive)
        return result


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
        assert prepared.keeps_constant_values == (step < 2)
    assert prepared.kept == ()
    still = PreparedGraph(graph)  # the same constants every call: kept throughout
    for _ in range(5):
        still({"x": x}, constants={"c": c, "w": w})
    assert still.keeps_constant_values and still.kept == ("s1", "wt")


def test_unused_inputs_and_constants_may_be_left_out_only_when_asked() -> None:
    graph = Graph(
        inputs={"x": t(2), "label": TensorType((2,), "int64")},
        constants={"c": torch.full((2,), 3.0), "spare": torch.ones(5)},
        nodes=[Node("y", "mul", ("x", "c"), {}, t(2))],
        outputs={"y": "y"},
    )
    x = torch.tensor([1.0, -2.0])
    strict, lenient = PreparedGraph(graph), PreparedGraph(graph, unused_optional=True)
    assert strict.unused == lenient.unused == {"label", "spare"}
    full = strict({"x": x, "label": torch.zeros(2, dtype=torch.long)})["y"]
    assert torch.equal(full, x * 3)
    with pytest.raises(ValueError, match=r"missing \['label'\]"):
        strict({"x": x})
    alone = lenient({"x": x}, constants={"c": graph.constants["c"]})["y"]
    assert torch.equal(alone, full)
    # Given anyway, an unused input is still checked; an unknown one is still refused.
    with pytest.raises(TypeError, match="input 'label' must have dtype int64"):
        lenient({"x": x, "label": torch.zeros(2)})
    with pytest.raises(ValueError, match=r"unexpected \['z'\]"):
        lenient({"x": x, "z": x})


def test_run_loaded_takes_inputs_and_constants_in_one_mapping():
    graph = scaled_graph()
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(8))
    prepared = PreparedGraph(graph, unused_optional=True)
    want = PreparedGraph(graph)({"x": x}, copy_outputs=False)
    got = prepared.run_loaded({"x": x, **graph.constants})
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)
    with pytest.raises(ValueError, match="input 'x' must have shape"):
        prepared.run_loaded({"x": torch.zeros(3, 4), **graph.constants})
    with pytest.raises(ValueError, match=r"missing \['x'\]"):
        prepared.run_loaded(dict(graph.constants))
