"""The IR: TensorType checks, every verifier error, and the JSON round trip."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from mncore_compiler.capture import capture
from mncore_compiler.errors import IRVerificationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.ops import OPS, get_op
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


def test_tensor_type_checks() -> None:
    assert t(2, 3).numel == 6 and t().numel == 1 and t(2, 3).rank == 2
    assert str(t(2, 3, dtype="bfloat16")) == "bfloat16[2, 3]"
    with pytest.raises(ValueError, match="dtype must be one of .*, not 'float64'"):
        TensorType((2,), "float64")
    with pytest.raises(ValueError, match="shape must be a tuple of non-negative ints"):
        TensorType((2, -1), F32)
    with pytest.raises(ValueError, match="shape must be a tuple"):
        TensorType([2, 3], F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not int8"):
        TensorType.of(torch.ones(2, dtype=torch.int8))


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


@pytest.mark.parametrize(
    ("op", "operands", "attrs", "message"),
    [
        ("add", [t(2, 3), t(4)], {}, r"shapes \[2, 3\] and \[4\] do not broadcast"),
        ("reshape", [t(2, 3)], {"shape": (4, 2)}, "cannot reshape"),
        ("permute", [t(2, 3)], {"dims": (0, 0)}, "must be a permutation"),
        ("expand", [t(2, 3)], {"shape": (4, 3)}, "cannot expand"),
        ("sum", [t(2, 3)], {"dims": (1, 0), "keepdim": False}, "sorted list of distinct"),
        ("sum", [t(2, 3)], {"dims": (2,), "keepdim": False}, r"dims must be an int in \[0, 2\)"),
        ("softmax", [t(2, 3)], {"dim": -1}, "dim must be an int in"),
        ("cat", [t(2, 3), t(3, 3)], {"dim": 1}, "differ outside dim 1"),
        ("cast", [t(2)], {"dtype": "int8"}, "dtype must be one of"),
        ("gelu", [t(2)], {"approximate": "erf"}, "approximate must be 'none' or 'tanh'"),
        ("mul_scalar", [t(2)], {"scalar": True}, "scalar must be an int or float"),
        ("matmul", [t(2, 3), t(3, 4, dtype="float16")], {}, "must have one dtype"),
        ("addmm", [t(5), t(2, 3), t(3, 4)], {"alpha": 1.0, "beta": 1.0}, "does not broadcast"),
    ],
)  # fmt: skip
def test_op_rules_reject(op: str, operands: list[TensorType], attrs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_op(op).infer(operands, attrs)


def test_op_table_is_complete() -> None:
    for name, opdef in OPS.items():
        assert opdef.name == name
        assert opdef.kind in {
            "elementwise",
            "matmul",
            "reduction",
            "normalization",
            "layout",
            "cast",
        }
    assert get_op("matmul").flops([t(2, 3, 5), t(2, 5, 4)], {}) == 2 * 2 * 3 * 4 * 5
    assert get_op("reshape").flops([t(2, 3)], {"shape": (6,)}) == 0
    with pytest.raises(KeyError, match="unknown IR op 'nope'"):
        get_op("nope")


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
