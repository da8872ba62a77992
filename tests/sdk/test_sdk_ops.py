"""Every supported op, compiled and run on the functional device, matches torch eager.

Each function runs with its IOs in the default layouts (host-friendly inputs, compute-native
outputs) and again with every IO constrained to other layouts (compute-native, transposed,
spread over Groups), so the data passes through to_device / from_device of each.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mlsdk import storage
from mncore_hdl.layout import Layout, native_layout

torch.manual_seed(0)
LIN = torch.nn.Linear(64, 48)
MLP = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
W = torch.randn(64, 16)
#: A closed-over ``expand``ed view: stride 0, so no in-place write could ever restore it.
EXPANDED = torch.randn(1, 64).expand(32, 64)

A = (32, 64)
FUNCTIONS = {
    "add_broadcast": (lambda d: {"y": d["a"] + d["b"]}, {"a": A, "b": (1, 64)}),
    "sub_scalar": (lambda d: {"y": d["a"] - 0.5}, {"a": A}),
    "mul_div": (lambda d: {"y": d["a"] * d["b"] / 3.0}, {"a": A, "b": (32, 1)}),
    "div_tensor": (lambda d: {"y": d["a"] / (d["b"].abs() + 1)}, {"a": A, "b": A}),
    "neg_exp": (lambda d: {"y": torch.exp(-d["a"])}, {"a": A}),
    "relu": (lambda d: {"y": torch.relu(d["a"])}, {"a": A}),
    "gelu": (lambda d: {"y": F.gelu(d["a"])}, {"a": A}),
    "gelu_tanh": (lambda d: {"y": F.gelu(d["a"], approximate="tanh")}, {"a": A}),
    "sigmoid_tanh": (lambda d: {"y": torch.sigmoid(d["a"]), "z": torch.tanh(d["a"])}, {"a": A}),
    "matmul": (lambda d: {"y": d["a"] @ d["b"]}, {"a": A, "b": (64, 16)}),
    "bmm": (lambda d: {"y": torch.matmul(d["a"], d["b"])}, {"a": (2, 8, 16), "b": (2, 16, 8)}),
    "linear": (lambda d: {"y": LIN(d["a"])}, {"a": A}),
    # 1-D operands: make_fx traces v @ W as unsqueeze, mm and an in-place squeeze_.
    "vector_matmul": (lambda d: {"y": d["v"] @ W, "z": d["a"] @ d["v"]}, {"v": (64,), "a": A}),
    "linear_1d": (lambda d: {"y": LIN(d["v"]), "z": F.linear(d["v"], W.t())}, {"v": (64,)}),
    "mv_dot": (lambda d: {"y": torch.mv(d["a"], d["v"]), "z": torch.dot(d["v"], d["v"])},
               {"a": A, "v": (64,)}),
    "expanded_constant": (lambda d: {"y": d["a"] + EXPANDED}, {"a": A}),
    "mlp_softmax": (lambda d: {"p": torch.softmax(MLP(d["a"]), dim=-1)}, {"a": A}),
    "sum_mean_max": (lambda d: {"s": d["a"].sum(dim=1), "m": d["a"].mean(dim=0, keepdim=True),
                                "x": d["a"].amax(dim=-1, keepdim=True)}, {"a": A}),
    "softmax": (lambda d: {"y": F.softmax(d["a"], dim=0)}, {"a": A}),
    "reshape_permute": (lambda d: {"y": d["a"].reshape(4, 8, 64).permute(2, 0, 1),
                                   "t": d["a"].t(), "v": d["a"].view(-1)}, {"a": A}),
    "transpose_3d": (lambda d: {"y": d["a"].transpose(0, 2) * 2}, {"a": (2, 33, 65)}),
    "cat": (lambda d: {"y": torch.cat([d["a"], d["b"]], dim=0),
                       "z": torch.cat([d["a"], d["a"]], dim=1)}, {"a": A, "b": (8, 64)}),
    "odd_shape": (lambda d: {"y": torch.relu(d["a"]) + d["a"].mean()}, {"a": (33, 65)}),
}


def _alternative(shape, dtype):
    """A non-default layout: transposed (2-D), else compute-native."""
    if len(shape) == 2:
        rows, cols = shape
        lanes = min(2, rows)
        return Layout.parse(f"({rows},{cols})/(({-(-rows // lanes)}:1, {lanes}_W:1), "
                            f"({cols}:{-(-rows // lanes)}))", dtype)
    return native_layout(shape, dtype)


def _inputs(shapes):
    return {name: torch.randn(shape) for name, shape in shapes.items()}


@pytest.mark.parametrize("variant", ["default", "constrained"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_op_matches_torch_eager(context, tmp_path, seed, name, variant):
    fn, shapes = FUNCTIONS[name]
    sample = _inputs(shapes)
    constraints = None
    if variant == "constrained":
        expected = fn(sample)
        ios = {**sample, **expected}
        constraints = {io: _alternative(tuple(t.shape), "float32") for io, t in ios.items()}
    compiled = context.compile(fn, sample, storage.path(tmp_path / name),
                               options={"float_dtype": "float"},
                               io_spec_constraints=constraints)
    if constraints:
        for io, layout in constraints.items():
            spec = compiled.input_specs.get(io) or compiled.output_specs[io]
            assert spec.layout == layout
    inputs = _inputs(shapes)
    got = {k: v.cpu() for k, v in compiled(inputs).items()}
    want = fn(inputs)
    assert list(got) == list(want)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, float_dtype", [(torch.float16, "half"),
                                                (torch.bfloat16, "bfloat16")])
def test_reduced_precision_matches_torch(context, tmp_path, seed, dtype, float_dtype):
    def fn(d):
        return {"y": torch.softmax(d["a"] @ d["b"], dim=-1) + d["a"].sum(dim=1, keepdim=True)}

    sample = {"a": torch.randn(16, 32).to(dtype), "b": torch.randn(32, 8).to(dtype)}
    compiled = context.compile(fn, sample, storage.path(tmp_path / "f"),
                               options={"float_dtype": float_dtype})
    got = compiled(sample)["y"].cpu()
    assert got.dtype == dtype
    torch.testing.assert_close(got, fn(sample)["y"], rtol=2e-2, atol=5e-2)


def test_unsupported_op_fails_at_compile_time(context, tmp_path):
    from mncore_compiler.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError, match="kthvalue"):
        context.compile(lambda d: {"y": torch.kthvalue(d["a"], 1, keepdim=True).values},
                        {"a": torch.randn(4, 4)},
                        storage.path(tmp_path / "s"))


def test_a_closed_over_expanded_view_is_read_not_written_back(context, tmp_path):
    before = EXPANDED.clone()
    fn, shapes = FUNCTIONS["expanded_constant"]
    compiled = context.compile(fn, _inputs(shapes), storage.path(tmp_path / "e"))
    assert EXPANDED.stride()[0] == 0 and torch.equal(EXPANDED, before)
    x = _inputs(shapes)
    torch.testing.assert_close(compiled(x)["y"].cpu(), fn(x)["y"])
