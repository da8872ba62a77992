"""The IR (``ir.py``): every verifier error, the JSON round trip, the graph builder."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from mncore_compiler.capture import capture
from mncore_compiler.errors import IRVerificationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, GraphBuilder, Node, freeze_attrs
from mncore_compiler.ops import OpTypeError
from mncore_compiler.types import TensorType
from torch import nn

SEED = 7
F32 = "float32"


def t(*shape: int, dtype: str = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def small_graph() -> Graph:
    """x[2,3] -> y = relu(x @ w + b)."""
    return Graph(
        inputs={"x": t(2, 3)},
        constants={"w": torch.ones(3, 4), "b": torch.zeros(4)},
        nodes=[
            Node("mm", "matmul", ("x", "w"), {}, t(2, 4)),
            Node("add", "add", ("mm", "b"), {}, t(2, 4)),
            Node("y", "relu", ("add",), {}, t(2, 4)),
        ],
        outputs={"y": "y"},
    )


def test_valid_graph_verifies_and_prints() -> None:
    graph = small_graph()
    graph.verify()
    text = str(graph)
    assert "%mm: float32[2, 4] = matmul(%x, %w)" in text and "return {y=%y}" in text


def _relu_y(result: TensorType) -> Node:
    return Node("y", "relu", ("add",), {}, result)


def _broken(mutate) -> Graph:  # type: ignore[no-untyped-def]
    graph = small_graph()
    mutate(graph)
    return graph


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda g: g.nodes.__setitem__(1, Node("add", "add", ("mm", "q"), {}, t(2, 4))),
         r"operand\(s\) \['q'\] are not defined"),
        (lambda g: g.nodes.reverse(), "not defined before this node"),
        (lambda g: g.nodes.append(Node("mm", "relu", ("y",), {}, t(2, 4))),
         "value 'mm' is already defined"),
        (lambda g: g.nodes.append(Node("x", "relu", ("y",), {}, t(2, 4))),
         "value 'x' is already defined"),
        (lambda g: g.nodes.__setitem__(2, Node("y", "relu", ("add",), {}, t(4, 2))),
         r"result type is float32\[4, 2\] but the relu shape rule gives float32\[2, 4\]"),
        (lambda g: g.nodes.__setitem__(2, _relu_y(t(2, 4, dtype="bfloat16"))),
         "result type is bfloat16"),
        (lambda g: g.nodes.__setitem__(2, Node("y", "frobnicate", ("add",), {}, t(2, 4))),
         "unknown IR op 'frobnicate'; known ops: "),
        (lambda g: g.outputs.__setitem__("z", "nowhere"),
         "output 'z' names 'nowhere', which is not an input, constant or node"),
        (lambda g: g.outputs.clear(), "graph has no outputs"),
        (lambda g: g.nodes.__setitem__(0, Node("mm", "matmul", ("w", "x"), {}, t(2, 4))),
         "matmul inner sizes differ"),
        (lambda g: g.nodes.__setitem__(2, Node("y", "relu", ("add", "add"), {}, t(2, 4))),
         r"relu takes 1 operand\(s\), got 2"),
        (lambda g: g.nodes.__setitem__(2, Node("y", "relu", ("add",), {"k": 1}, t(2, 4))),
         r"relu takes attributes \[\], got \['k'\]"),
        (lambda g: g.constants.__setitem__("w", torch.ones(3, 4, dtype=torch.int8)),
         "constant 'w': dtype must be one of"),
        (lambda g: g.constants.__setitem__("w", [1.0]), "constant 'w' must be a torch.Tensor"),
        (lambda g: g.inputs.__setitem__(3, t(1)), "input name must be a non-empty str, not 3"),
    ],
    ids=["undefined", "order", "redefine_node", "redefine_input", "shape", "dtype", "unknown_op",
         "bad_output", "no_outputs", "op_rule", "arity", "attrs", "int_constant",
         "non_tensor_constant", "int_input_name"],
)  # fmt: skip
def test_verifier_errors(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IRVerificationError, match=message):
        _broken(mutate).verify()


def test_attrs_are_frozen_and_sorted() -> None:
    node = Node("s", "sum", ("x",), {"keepdim": True, "dims": [0, 1]}, t(1, 1))
    assert node.attrs == {"dims": (0, 1), "keepdim": True}
    assert list(node.attrs) == ["dims", "keepdim"]
    with pytest.raises(TypeError, match="attribute values must be"):
        Node("s", "sum", ("x",), {"dims": {0}}, t(1))


def _mlp_graph() -> tuple[Graph, dict[str, torch.Tensor], nn.Module]:
    torch.manual_seed(SEED)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        h = F.gelu(mlp(d["x"]), approximate="tanh")
        return {"p": torch.softmax(h, -1), "s": h.sum(0, keepdim=True)}

    inputs = {"x": torch.randn(4, 6, generator=torch.Generator().manual_seed(SEED))}
    return capture(fn, inputs), inputs, mlp


def test_json_round_trip_interprets_the_same() -> None:
    graph, inputs, _ = _mlp_graph()
    data = json.loads(json.dumps(graph.to_json()))
    again = Graph.from_json(data, graph.constant_tensors())
    assert again.to_json() == graph.to_json()
    expected, got = interpret(graph, inputs), interpret(again, inputs)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)


def test_json_is_deterministic_and_versioned() -> None:
    first, _, _ = _mlp_graph()
    second, _, _ = _mlp_graph()
    dump = json.dumps(first.to_json(), sort_keys=True)
    assert dump == json.dumps(second.to_json(), sort_keys=True)
    data = first.to_json()
    assert data["format"] == "mncore-ir" and data["version"] == 1
    assert [c["name"] for c in data["constants"]] == list(first.constants)
    assert "tensor" not in dump


def test_from_json_rejects_bad_data() -> None:
    graph, _, _ = _mlp_graph()
    data, constants = graph.to_json(), graph.constant_tensors()
    with pytest.raises(IRVerificationError, match="version 99 is not supported"):
        Graph.from_json({**data, "version": 99}, constants)
    with pytest.raises(IRVerificationError, match="not a mncore-ir graph"):
        Graph.from_json({"nodes": []}, constants)
    missing = {k: v for k, v in constants.items() if k != "mlp.0.weight"}
    with pytest.raises(IRVerificationError, match="do not match the graph's"):
        Graph.from_json(data, missing)
    wrong = {**constants, "mlp.0.weight": torch.ones(2, 2)}
    with pytest.raises(IRVerificationError, match=r"constant 'mlp.0.weight' is float32\[2, 2\]"):
        Graph.from_json(data, wrong)
    broken = json.loads(json.dumps(data))
    broken["nodes"][0]["operands"] = ["ghost"]
    with pytest.raises(IRVerificationError, match="'ghost'"):
        Graph.from_json(broken, constants)
    del broken["outputs"]
    with pytest.raises(IRVerificationError, match="malformed mncore-ir graph"):
        Graph.from_json(broken, constants)


def test_graph_queries() -> None:
    graph = small_graph()
    assert graph.type_of("w") == t(3, 4) and graph.type_of("y") == t(2, 4)
    assert graph.output_types() == {"y": t(2, 4)}
    assert graph.users()["mm"] == ["add"] and graph.users()["y"] == []
    copy = graph.copy()
    copy.nodes.clear()
    assert len(graph.nodes) == 3
    with pytest.raises(KeyError, match="no value named 'nope'"):
        graph.type_of("nope")


# -- the graph builder --------------------------------------------------------------------------


def test_builder_types_names_and_freezes() -> None:
    b = GraphBuilder(reserved={"relu"})
    b.add_input("x", t(2, 3))
    b.add_constant("w", torch.ones(3, 4))
    mm = b.emit("matmul", ["x", "w"])
    y = b.emit("relu", [mm])
    total = b.emit("sum", [y], "total", dims=[0, 1], keepdim=False)
    assert (mm, y, total) == ("matmul", "relu_1", "total")  # "relu" was reserved
    assert b.type(y) == t(2, 4) and b.type(total) == t()
    assert b.graph.nodes[-1].attrs == {"dims": (0, 1), "keepdim": False}
    assert b.fresh("x") == "x_1"
    b.graph.outputs = {"y": total}
    b.graph.verify()


def test_builder_extends_a_graph_and_rejects_bad_nodes() -> None:
    graph = small_graph()
    b = GraphBuilder(graph)
    assert b.type("add") == t(2, 4)
    assert b.emit("neg", ["y"]) == "neg" and graph.nodes[-1].op == "neg"
    with pytest.raises(OpTypeError, match="do not broadcast"):
        b.emit("add", ["x", "w"])
    with pytest.raises(KeyError, match="graph has no value named 'nope'"):
        b.emit("relu", ["nope"])
    with pytest.raises(TypeError, match="IR attribute values must be"):
        freeze_attrs({"scalar": object()})
