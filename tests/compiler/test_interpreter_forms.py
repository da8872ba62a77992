"""The prepared graph's cheaper calls (interpreter_forms): the same bits as the references,
and only where the rules allow them."""

from __future__ import annotations

import pytest
import torch
from mncore_compiler.interpreter import PreparedGraph
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.ops import OPS


def t(*shape: int, dtype: str = "float32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def _embedding_mlp(extra_reader: str | None = None, index_out: bool = False,
                   gathered_out: bool = False) -> Graph:
    """``table[x[:, 1]] @ w``: a column of ``x`` as an index (slice, reshape), the gather
    reshaped to its own shape, a 2-D matmul; ``extra_reader`` names a value read again by a
    negation, which the rules must then leave alone."""
    nodes = [
        Node("col", "slice", ("x",), {"dim": 1, "start": 1, "end": 2, "step": 1},
             t(8, 1, dtype="int64")),
        Node("idx", "reshape", ("col",), {"shape": (8,)}, t(8, dtype="int64")),
        Node("rows", "index_select", ("table", "idx"), {"dim": 0}, t(8, 4)),
        Node("same", "reshape", ("rows",), {"shape": (8, 4)}, t(8, 4)),
        Node("out", "matmul", ("same", "w"), {}, t(8, 3)),
    ]
    outputs = {"out": "out"}
    if extra_reader is not None:
        dtype = "int64" if extra_reader in ("col", "idx") else "float32"
        shape = {"col": (8, 1), "idx": (8,), "same": (8, 4)}[extra_reader]
        nodes.append(Node("neg", "neg", (extra_reader,), {}, t(*shape, dtype=dtype)))
        outputs["neg"] = "neg"
    if index_out:
        outputs["idx"] = "idx"
    if gathered_out:
        outputs["same"] = "same"
    graph = Graph(inputs={"x": t(8, 2, dtype="int64")},
                  constants={"table": torch.randn(10, 4), "w": torch.randn(4, 3)},
                  nodes=nodes, outputs=outputs)
    graph.verify()
    return graph


def _by_reference(graph: Graph, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each node's reference called in graph order: what the rewrites must equal."""
    values: dict[str, torch.Tensor] = {**inputs, **graph.constants}
    for node in graph.nodes:
        values[node.name] = OPS[node.op].reference([values[n] for n in node.operands],
                                                  node.attrs)
    return {out: values[name] for out, name in graph.outputs.items()}


def _source(prepared: PreparedGraph) -> str:
    return prepared.source


def _counting_mm(monkeypatch) -> list:
    """``torch.mm`` counting its calls (a graph prepared after this binds the counting one)."""
    calls: list = []
    real = torch.mm

    def mm(*args):
        calls.append(args)
        return real(*args)
    monkeypatch.setattr(torch, "mm", mm)
    return calls


@pytest.mark.parametrize("seed", range(3))
def test_rewritten_steps_give_the_references_bits(seed: int, monkeypatch) -> None:
    torch.manual_seed(seed)
    graph = _embedding_mlp()
    mm = _counting_mm(monkeypatch)
    prepared = PreparedGraph(graph)
    source = _source(prepared)
    assert ".select(" in source and ".reshape(" not in source
    assert "contiguous" not in source
    for run in range(3):  # the checked first run, then the kept constants' runs
        x = torch.randint(0, 10, (8, 2))
        got, expected = prepared({"x": x}), _by_reference(graph, {"x": x})
        assert len(mm) == run + 1  # the matmul of two matrices ran as mm
        assert got.keys() == expected.keys()
        for name in expected:
            assert got[name].dtype == expected[name].dtype
            assert torch.equal(got[name], expected[name]), name


@pytest.mark.parametrize("reader", ["col", "idx"])
def test_a_column_read_elsewhere_stays_a_copy(reader: str) -> None:
    graph = _embedding_mlp(extra_reader=reader)
    source = _source(PreparedGraph(graph))
    assert ".select(" not in source and ".contiguous()" in source
    x = torch.randint(0, 10, (8, 2))
    got, expected = PreparedGraph(graph)({"x": x}), _by_reference(graph, {"x": x})
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


def test_outputs_are_never_rewritten() -> None:
    graph = _embedding_mlp(index_out=True, gathered_out=True)
    source = _source(PreparedGraph(graph))
    assert ".select(" not in source and source.count(".reshape(") == 2
    x = torch.randint(0, 10, (8, 2))
    got = PreparedGraph(graph)({"x": x})
    assert got["idx"].is_contiguous() and torch.equal(got["idx"], x[:, 1])
    assert torch.equal(got["same"], graph.constants["table"][x[:, 1]])


def test_batched_matmul_keeps_matmul(monkeypatch) -> None:
    graph = Graph(inputs={"a": t(2, 3, 4), "b": t(2, 4, 5)},
                  nodes=[Node("c", "matmul", ("a", "b"), {}, t(2, 3, 5))], outputs={"c": "c"})
    graph.verify()
    mm = _counting_mm(monkeypatch)
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert torch.equal(PreparedGraph(graph)({"a": a, "b": b})["c"], torch.matmul(a, b))
    assert mm == []
