"""The pass pipeline, decomposition and dead-code elimination."""

from __future__ import annotations

import pytest
import torch
from mncore_compiler.capture import capture
from mncore_compiler.errors import IRVerificationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.passes import (
    DEFAULT_PIPELINE,
    CompileContext,
    DeadCodeElimination,
    Decompose,
    Pass,
    run_pipeline,
)
from torch import nn

SEED = 5


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(SEED))


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def test_default_pipeline() -> None:
    assert [p.name for p in DEFAULT_PIPELINE] == ["decompose", "dce"]
    assert all(isinstance(p, Pass) for p in DEFAULT_PIPELINE)


@pytest.mark.parametrize(
    ("alpha", "beta", "ops"),
    [
        (1, 1, ["matmul", "add"]),
        (2.0, 1, ["matmul", "mul_scalar", "add"]),
        (1, 0.5, ["matmul", "mul_scalar", "add"]),
        (3, 0, ["matmul", "mul_scalar"]),
        (1, 0, ["matmul"]),
    ],
)
def test_addmm_decomposition(alpha: float, beta: float, ops: list[str]) -> None:
    inputs = {"b": randn(1, 4), "x": randn(3, 5), "w": randn(5, 4)}
    graph = capture(
        lambda d: {"y": torch.addmm(d["b"], d["x"], d["w"], alpha=alpha, beta=beta)}, inputs
    )
    ctx = CompileContext()
    lowered = run_pipeline(graph, ctx)
    assert _ops(graph) == ["addmm"] and _ops(lowered) == ops
    assert lowered.outputs == graph.outputs, "the last node keeps the replaced node's name"
    expected = interpret(graph, inputs)["y"]
    torch.testing.assert_close(interpret(lowered, inputs)["y"], expected, msg=f"seed={SEED}")
    assert ctx.state["passes_run"] == ["decompose", "dce"]


def test_linear_lowering_keeps_graph_intact() -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(5, 4)
    graph = capture(lambda d: {"y": lin(d["x"])}, {"x": randn(3, 5)})
    before = graph.to_json()
    lowered = run_pipeline(graph, CompileContext())
    assert graph.to_json() == before, "passes must not modify their input graph"
    assert "addmm" not in _ops(lowered) and "matmul" in _ops(lowered)


def test_dead_code_elimination() -> None:
    torch.manual_seed(SEED)
    unused = nn.Linear(4, 4)
    used = torch.ones(4)

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        _ = torch.exp(unused(d["x"]))
        return {"y": d["x"] * used}

    graph = capture(fn, {"x": randn(2, 4), "spare": randn(3)})
    lowered = DeadCodeElimination().run(graph, CompileContext())
    assert "exp" in _ops(graph) and _ops(lowered) == ["mul"]
    assert list(lowered.constants) == ["used"]
    assert list(lowered.inputs) == ["x", "spare"], "inputs are the signature; they stay"


def test_decompose_makes_promotion_explicit() -> None:
    graph = Graph(
        inputs={"a": TensorType((2, 3), "float16"), "b": TensorType((2, 3), "float32")},
        nodes=[Node("c", "cat", ("a", "b"), {"dim": 0}, TensorType((4, 3), "float32"))],
        outputs={"c": "c"},
    )
    lowered = Decompose().run(graph, CompileContext())
    assert _ops(lowered) == ["cast", "cat"]
    assert lowered.nodes[0].operands == ("a",) and lowered.nodes[0].attrs == {"dtype": "float32"}
    inputs = {"a": randn(2, 3).half(), "b": randn(2, 3)}
    torch.testing.assert_close(interpret(lowered, inputs)["c"], interpret(graph, inputs)["c"])


class _Breaker:
    name = "breaker"

    def run(self, graph: Graph, ctx: CompileContext) -> Graph:
        result = graph.copy()
        result.outputs = {"y": "ghost"}
        return result


class _Recorder:
    name = "recorder"

    def run(self, graph: Graph, ctx: CompileContext) -> Graph:
        ctx.state["seen"] = ctx.options["flag"]
        return graph


def test_pipeline_verifies_after_each_pass() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    with pytest.raises(IRVerificationError, match="after pass 'breaker': output 'y' names 'ghost'"):
        run_pipeline(graph, CompileContext(), [Decompose(), _Breaker()])


def test_pipeline_verifies_its_input() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    graph.outputs["z"] = "nothing"
    with pytest.raises(IRVerificationError, match="output 'z'"):
        run_pipeline(graph, CompileContext())


def test_custom_pipeline_and_context() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    ctx = CompileContext(options={"flag": 42})
    result = run_pipeline(graph, ctx, [*DEFAULT_PIPELINE, _Recorder()])
    assert ctx.state["seen"] == 42 and ctx.state["passes_run"][-1] == "recorder"
    assert _ops(result) == ["add_scalar"]
    assert CompileContext().options == {} and CompileContext().state == {}


def test_pipeline_rejects_bad_entries() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    with pytest.raises(TypeError, match="pipeline entries must have a 'name' and a run"):
        run_pipeline(graph, CompileContext(), [lambda g, c: g])  # type: ignore[list-item]

    class _Bad:
        name = "bad"

        def run(self, graph: Graph, ctx: CompileContext) -> Graph:
            return None  # type: ignore[return-value]

    with pytest.raises(TypeError, match="pass 'bad' returned NoneType, not a Graph"):
        run_pipeline(graph, CompileContext(), [_Bad()])
