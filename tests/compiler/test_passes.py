"""The pass pipeline, decomposition, dead-code elimination and layout assignment."""

from __future__ import annotations

import pytest
import torch
from mncore_compiler.capture import capture
from mncore_compiler.errors import IRVerificationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.passes import (
    PIPELINE,
    Compilation,
    CompileRequest,
    Pass,
    PassRecord,
    decompose,
    eliminate_dead_code,
    graph_pass,
    run_pipeline,
)
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import host_layout
from torch import nn

SEED = 5


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(SEED))


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def test_pipeline() -> None:
    assert [p.name for p in PIPELINE] == ["decompose", "dce", "mixed-precision", "assign-layouts"]
    assert all(isinstance(p, Pass) for p in PIPELINE)


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
    result = run_pipeline(Compilation(graph))
    lowered = result.graph
    assert _ops(graph) == ["addmm"] and _ops(lowered) == ops
    assert lowered.outputs == graph.outputs, "the last node keeps the replaced node's name"
    expected = interpret(graph, inputs)["y"]
    torch.testing.assert_close(interpret(lowered, inputs)["y"], expected, msg=f"seed={SEED}")
    assert result.passes_run == ["decompose", "dce", "mixed-precision", "assign-layouts"]
    assert all(isinstance(r, PassRecord) and r.seconds >= 0 and r.verify_seconds >= 0
               for r in result.history)


def test_linear_lowering_keeps_graph_intact() -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(5, 4)
    graph = capture(lambda d: {"y": lin(d["x"])}, {"x": randn(3, 5)})
    before = graph.to_json()
    lowered = run_pipeline(Compilation(graph)).graph
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
    lowered = eliminate_dead_code(graph)
    assert "exp" in _ops(graph) and _ops(lowered) == ["mul"]
    assert list(lowered.constants) == ["used"]
    assert list(lowered.inputs) == ["x", "spare"], "inputs are the signature; they stay"


def test_decompose_makes_promotion_explicit() -> None:
    graph = Graph(
        inputs={"a": TensorType((2, 3), "float16"), "b": TensorType((2, 3), "float32")},
        nodes=[Node("c", "cat", ("a", "b"), {"dim": 0}, TensorType((4, 3), "float32"))],
        outputs={"c": "c"},
    )
    lowered = decompose(graph)
    assert _ops(lowered) == ["cast", "cat"]
    assert lowered.nodes[0].operands == ("a",) and lowered.nodes[0].attrs == {"dtype": "float32"}
    inputs = {"a": randn(2, 3).half(), "b": randn(2, 3)}
    torch.testing.assert_close(interpret(lowered, inputs)["c"], interpret(graph, inputs)["c"])


def _breaker(graph: Graph) -> Graph:
    result = graph.copy()
    result.outputs = {"y": "ghost"}
    return result


def test_pipeline_verifies_after_each_pass() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    pipeline = [graph_pass("decompose", decompose), graph_pass("breaker", _breaker)]
    with pytest.raises(IRVerificationError, match="after pass 'breaker': output 'y' names 'ghost'"):
        run_pipeline(Compilation(graph), pipeline)


def test_pipeline_verifies_its_input() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    graph.outputs["z"] = "nothing"
    with pytest.raises(IRVerificationError, match="output 'z'"):
        run_pipeline(Compilation(graph))


def test_custom_pipeline_and_options() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    seen: list[CompileRequest] = []

    def recorder(compilation: Compilation) -> Compilation:
        seen.append(compilation.request)
        return compilation

    request = CompileRequest(constraints={"x": host_layout((2,), "float32")})
    result = run_pipeline(Compilation(graph, request), [*PIPELINE, Pass("recorder", recorder)])
    assert seen == [request] and result.passes_run[-1] == "recorder"
    assert _ops(result.graph) == ["add_scalar"]
    assert result.layout_plan().inputs["x"] is request.constraints["x"]
    assert CompileRequest().constraints == {} and CompileRequest().config == MNCORE2
    assert Compilation(graph).layouts is None and Compilation(graph).history == ()


def test_layouts_come_from_their_pass() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    lowered = run_pipeline(Compilation(graph), PIPELINE[:2])
    with pytest.raises(ValueError, match=r"no layouts assigned.*\['decompose', 'dce'\]"):
        lowered.layout_plan()


def test_pipeline_rejects_bad_entries() -> None:
    graph = capture(lambda d: {"y": d["x"] + 1}, {"x": randn(2)})
    with pytest.raises(TypeError, match=r"pipeline entries must be Pass\(name, run\)"):
        run_pipeline(Compilation(graph), [lambda c: c])  # type: ignore[list-item]
    bad = Pass("bad", lambda c: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="pass 'bad' returned NoneType, not a Compilation"):
        run_pipeline(Compilation(graph), [bad])
    bad_graph = graph_pass("bad-graph", lambda g: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="pass 'bad-graph' returned NoneType, not a Compilation"):
        run_pipeline(Compilation(graph), [bad_graph])
