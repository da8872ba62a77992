"""Capture of every supported torch op, checked against torch eager through the interpreter."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
import torch
import torch.nn.functional as F
from mncore_compiler.capture import capture
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, TensorType
from mncore_compiler.passes import Compilation, run_pipeline
from mncore_hdl.layout import dtype_name
from torch import nn

SEED = 1234
TensorDict = dict[str, torch.Tensor]


def randn(seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(dtype)


def assert_matches_eager(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    inputs: TensorDict,
    seed: int = SEED,
    **tolerances: float,
) -> Graph:
    """Capture ``fn``; the interpreter, before and after the passes, must agree with eager."""
    float_dtype = str(tolerances.pop("float_dtype", "float32"))
    graph = capture(fn, inputs, float_dtype=float_dtype)
    with torch.no_grad():
        expected = fn(inputs)
    lowered = run_pipeline(Compilation(graph)).graph
    for label, candidate in (("captured", graph), ("after passes", lowered)):
        got = interpret(candidate, inputs)
        assert list(got) == list(expected), f"{label}: output names {list(got)} (seed={seed})"
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name],
                value,
                **tolerances,
                msg=lambda m, n=name, lab=label: f"{lab} output {n!r} (seed={seed}): {m}",
            )
    return graph


def _ops(graph: Graph) -> list[str]:
    return [node.op for node in graph.nodes]


# -- elementwise --------------------------------------------------------------------------------

BINARY_CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y.abs() + 1),
    "add_alpha": lambda x, y: torch.add(x, y, alpha=2.5),
    "sub_alpha": lambda x, y: torch.sub(x, y, alpha=-3),
    "rsub_tensor": lambda x, y: torch.rsub(x, y),
}


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                    ((5,), ())])  # fmt: skip
@pytest.mark.parametrize("case", sorted(BINARY_CASES))
def test_binary_broadcast(case: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    op = BINARY_CASES[case]
    inputs = {"x": randn(SEED, *shapes[0]), "y": randn(SEED + 1, *shapes[1])}
    assert_matches_eager(lambda d: {"out": op(d["x"], d["y"])}, inputs)


SCALAR_CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "add": lambda x: x + 2,
    "radd": lambda x: 2.5 + x,
    "sub": lambda x: x - 1.5,
    "rsub": lambda x: 1 - x,
    "mul": lambda x: x * 3,
    "rmul": lambda x: -0.5 * x,
    "div": lambda x: x / 4,
    "rdiv": lambda x: 4 / (x.abs() + 1),
    "rsub_alpha": lambda x: torch.rsub(x, 2.0, alpha=3),
    "chain": lambda x: ((x + 1) * 2 - 3) / 5,
}


@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
def test_python_scalars(case: str) -> None:
    op = SCALAR_CASES[case]
    graph = assert_matches_eager(lambda d: {"out": op(d["x"])}, {"x": randn(SEED, 3, 5)})
    assert graph.constants == {}, "python scalars must become attributes, not constants"


UNARY_CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "neg": lambda x: -x,
    "abs": torch.abs,
    "relu": torch.relu,
    "relu_module": nn.ReLU(),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "reciprocal": lambda x: torch.reciprocal(x.abs() + 1),
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.5),
}


@pytest.mark.parametrize("case", sorted(UNARY_CASES))
def test_unary(case: str) -> None:
    op = UNARY_CASES[case]
    assert_matches_eager(lambda d: {"out": op(d["x"])}, {"x": randn(SEED, 4, 6)})


def test_gelu_approximation_is_an_attribute() -> None:
    x = {"x": randn(SEED, 8)}
    exact = capture(lambda d: {"y": F.gelu(d["x"])}, x)
    tanh = capture(lambda d: {"y": F.gelu(d["x"], approximate="tanh")}, x)
    assert exact.nodes[0].attrs == {"approximate": "none"}
    assert tanh.nodes[0].attrs == {"approximate": "tanh"}


# -- matmul and linear --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes",
    [((3, 5), (5, 4)), ((2, 3, 5), (2, 5, 4)), ((2, 3, 5), (5, 4)), ((2, 1, 3, 5), (4, 5, 2))],
    ids=["2d", "batched", "3d_by_2d", "broadcast_batch"],
)
def test_matmul(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    inputs = {"a": randn(SEED, *shapes[0]), "b": randn(SEED + 1, *shapes[1])}
    graph = assert_matches_eager(lambda d: {"c": d["a"] @ d["b"]}, inputs)
    assert "matmul" in _ops(graph)


@pytest.mark.parametrize("shape", [(6, 8), (2, 3, 8)], ids=["2d", "3d"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_closing_over_module(shape: tuple[int, ...], bias: bool) -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(8, 5, bias=bias)
    graph = assert_matches_eager(lambda d: {"y": lin(d["x"])}, {"x": randn(SEED, *shape)})
    assert list(graph.inputs) == ["x"], "parameters must be constants, not inputs"
    expected = {"lin.weight", "lin.bias"} if bias else {"lin.weight"}
    assert set(graph.constants) == expected
    torch.testing.assert_close(graph.constants["lin.weight"], lin.weight.detach())


def test_addmm_alpha_beta() -> None:
    inputs = {"b": randn(SEED, 4), "x": randn(SEED + 1, 3, 5), "w": randn(SEED + 2, 5, 4)}
    for alpha, beta in [(1, 1), (2.0, 0.5), (1, 0), (-1.5, 0)]:
        graph = assert_matches_eager(
            lambda d, a=alpha, bt=beta: {
                "y": torch.addmm(d["b"], d["x"], d["w"], beta=bt, alpha=a)
            },
            inputs,
        )
        assert _ops(graph) == ["addmm"]
        assert "addmm" not in _ops(run_pipeline(Compilation(graph)).graph)


def test_mlp_with_gelu_and_softmax() -> None:
    torch.manual_seed(SEED)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 10))

    def fn(d: TensorDict) -> TensorDict:
        logits = mlp(d["x"])
        return {"probs": torch.softmax(logits, dim=-1), "logits": logits}

    graph = assert_matches_eager(fn, {"x": randn(SEED, 4, 16)})
    assert sorted(graph.constants) == ["mlp.0.bias", "mlp.0.weight", "mlp.2.bias", "mlp.2.weight"]
    assert list(graph.outputs) == ["probs", "logits"]


# -- reductions and softmax ---------------------------------------------------------------------

REDUCTION_CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum_dim": lambda x: x.sum(dim=1),
    "sum_dims_keepdim": lambda x: x.sum(dim=(0, 2), keepdim=True),
    "sum_all": lambda x: x.sum(),
    "sum_negative_dim": lambda x: torch.sum(x, -1, keepdim=True),
    "mean_dim": lambda x: x.mean(dim=-2),
    "mean_keepdim": lambda x: x.mean(dim=(1, 2), keepdim=True),
    "mean_all": lambda x: x.mean(),
    "amax": lambda x: x.amax(dim=(0, 1)),
    "amax_keepdim": lambda x: torch.amax(x, dim=-1, keepdim=True),
    "max_dim_values": lambda x: x.max(dim=1).values,
    "max_dim_keepdim": lambda x: torch.max(x, 2, keepdim=True)[0],
    "max_all": lambda x: x.max(),
    "softmax_last": lambda x: torch.softmax(x, dim=-1),
    "softmax_first": lambda x: F.softmax(x, dim=0),
    "softmax_module": nn.Softmax(dim=1),
    "log_softmax": lambda x: F.log_softmax(x, dim=-1),
}


@pytest.mark.parametrize("case", sorted(REDUCTION_CASES))
def test_reductions_and_softmax(case: str) -> None:
    op = REDUCTION_CASES[case]
    assert_matches_eager(lambda d: {"out": op(d["x"])}, {"x": randn(SEED, 3, 4, 5)})


# -- data movement ------------------------------------------------------------------------------

LAYOUT_CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "reshape": lambda x: x.reshape(6, -1),
    "view": lambda x: x.view(2, 3, 10),
    "flatten": lambda x: x.flatten(1),
    "flatten_module": nn.Flatten(),
    "unsqueeze": lambda x: x.unsqueeze(0).unsqueeze(-1),
    "squeeze": lambda x: x.unsqueeze(1).squeeze(1),
    "squeeze_all": lambda x: x.reshape(1, 6, 1, 10).squeeze(),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, -1),
    "t": lambda x: x.reshape(6, 10).t(),
    "mT": lambda x: x.mT,
    "contiguous": lambda x: x.transpose(1, 2).contiguous(),
    "clone_detach": lambda x: x.clone().detach() * 1,
    "expand": lambda x: x.sum(0, keepdim=True).expand(2, 4, 5),
    "expand_new_dims": lambda x: x.amax(0).expand(3, 2, 4, 5),
    "transpose_then_reshape": lambda x: x.transpose(0, 1).reshape(4, 15),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_layout_ops(case: str) -> None:
    op = LAYOUT_CASES[case]
    assert_matches_eager(lambda d: {"out": op(d["x"])}, {"x": randn(SEED, 3, 4, 5)})


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim: int) -> None:
    inputs = {"a": randn(SEED, 2, 3), "b": randn(SEED + 1, 2, 3), "c": randn(SEED + 2, 2, 3)}
    graph = assert_matches_eager(
        lambda d: {"out": torch.cat([d["a"], d["b"] * 2, d["c"]], dim=dim)}, inputs
    )
    assert [n.attrs["dim"] for n in graph.nodes if n.op == "cat"] == [dim % 2]


def test_identity_ops_leave_no_nodes() -> None:
    graph = capture(lambda d: {"y": d["x"].contiguous().clone().detach()}, {"x": randn(SEED, 3)})
    assert graph.nodes == []
    assert graph.outputs == {"y": "x"}


# -- dtypes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_inputs_of_reduced_precision(dtype: torch.dtype) -> None:
    inputs = {"x": randn(SEED, 4, 8, dtype=dtype), "w": randn(SEED + 1, 8, 3, dtype=dtype)}
    graph = assert_matches_eager(lambda d: {"y": torch.relu(d["x"] @ d["w"]) + 1}, inputs)
    assert graph.inputs["x"] == TensorType((4, 8), dtype_name(dtype))


def test_casts_between_float_dtypes() -> None:
    def fn(d: TensorDict) -> TensorDict:
        half = d["x"].half() * 2
        return {"half": half, "back": half.float() + d["x"], "bf": d["x"].to(torch.bfloat16)}

    graph = assert_matches_eager(fn, {"x": randn(SEED, 3, 4)})
    types = graph.output_types()
    assert [types[n].dtype for n in ("half", "back", "bf")] == ["float16", "float32", "bfloat16"]


def test_mixed_dtype_promotion_becomes_explicit_cast() -> None:
    inputs = {"x": randn(SEED, 3, dtype=torch.float16), "y": randn(SEED + 1, 3)}
    graph = assert_matches_eager(lambda d: {"z": d["x"] + d["y"]}, inputs)
    lowered = run_pipeline(Compilation(graph)).graph
    assert _ops(lowered) == ["cast", "add"]


@pytest.mark.parametrize("float_dtype", ["half", "float16", "bfloat16"])
def test_float_dtype_reduced_precision(float_dtype: str) -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(8, 4)
    graph = assert_matches_eager(
        lambda d: {"y": torch.softmax(lin(d["x"]), -1), "x": d["x"]},
        {"x": randn(SEED, 5, 8)},
        float_dtype=float_dtype,
        atol=2e-2,
        rtol=2e-2,
    )
    compute = "float16" if float_dtype == "half" else float_dtype
    assert graph.inputs["x"].dtype == "float32"
    assert {n: t.dtype for n, t in graph.output_types().items()} == {"y": "float32", "x": "float32"}
    assert graph.outputs["x"] == "x", "an input returned unchanged must not round-trip a cast"
    assert {str(t.dtype) for t in graph.constants.values()} == {f"torch.{compute}"}
    assert any(n.op == "matmul" or n.op == "addmm" for n in graph.nodes)
    assert all(n.type.dtype == compute for n in graph.nodes if n.op == "addmm")


@pytest.mark.parametrize("float_dtype", ["float", "float32"])
def test_float_dtype_float32_changes_nothing(float_dtype: str) -> None:
    inputs = {"x": randn(SEED, 3, 4)}
    graph = capture(lambda d: {"y": d["x"] * 2}, inputs, float_dtype=float_dtype)
    assert _ops(graph) == ["mul_scalar"]


# -- constants ----------------------------------------------------------------------------------


def test_closed_over_tensor_and_factory_constants() -> None:
    scale = randn(SEED, 4)

    def fn(d: TensorDict) -> TensorDict:
        return {"y": d["x"] * scale + torch.ones(4) + torch.full((3, 1), 0.5)}

    graph = assert_matches_eager(fn, {"x": randn(SEED + 1, 3, 4)})
    assert "scale" in graph.constants
    assert list(graph.inputs) == ["x"]


def test_many_factory_constants_stay_distinct() -> None:
    # Temporaries created while tracing may reuse each other's id(); each must stay its own.
    def fn(d: TensorDict) -> TensorDict:
        y = d["x"]
        for i in range(12):
            y = y + torch.full((4,) if i % 2 else (3, 1), float(i)) * torch.ones(1)
        return {"y": y}

    graph = assert_matches_eager(fn, {"x": randn(SEED, 3, 4)})
    assert len(graph.constants) == 24


def test_shared_parameter_is_one_constant() -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(4, 4)
    graph = assert_matches_eager(lambda d: {"y": lin(lin(d["x"]))}, {"x": randn(SEED, 2, 4)})
    assert sorted(graph.constants) == ["lin.bias", "lin.weight"]


def test_deterministic_and_ordered() -> None:
    torch.manual_seed(SEED)
    lin = nn.Linear(3, 3)

    def fn(d: TensorDict) -> TensorDict:
        return {"z": lin(d["b"]), "a": d["a"] + 1}

    inputs = {"b": randn(SEED, 2, 3), "a": randn(SEED + 1, 3)}
    first, second = capture(fn, inputs), capture(fn, inputs)
    assert first.to_json() == second.to_json()
    assert list(first.inputs) == ["b", "a"] and list(first.outputs) == ["z", "a"]


def test_output_may_be_an_input_or_repeat_a_value() -> None:
    inputs = {"x": randn(SEED, 3)}
    graph = assert_matches_eager(
        lambda d: {"same": d["x"], "y": d["x"] + 1, "y2": d["x"] + 1}, inputs
    )
    assert graph.outputs["same"] == "x"


def test_a_trace_makes_one_fake_tensor_mode_and_puts_torch_back(monkeypatch) -> None:
    # make_fx in real mode would build a FakeTensorMode (and record the Python stack) for each
    # traced value; capture shares one per trace, and leaves torch's name as it found it.
    from torch.fx.experimental import proxy_tensor

    mode_class = proxy_tensor.FakeTensorMode
    made = []
    init = mode_class.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(mode_class, "__init__", counting)
    x = torch.randn(3, 4)
    graph = capture(lambda d: {"y": (d["x"].exp() * 2 + 1).tanh().sum(0).softmax(0)}, {"x": x})
    assert len(graph.nodes) >= 5 and len(made) == 1
    assert proxy_tensor.FakeTensorMode is mode_class
