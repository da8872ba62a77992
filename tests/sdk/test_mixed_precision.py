"""float_dtype="mixed": float16 matmul operands, float32 accumulation, everything else float32.

Tolerances checked here are the ones docs/precision.md documents.
"""

from __future__ import annotations

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.examples import run_example
from mncore_compiler.capture import capture
from mncore_compiler.driver import compile_function
from mncore_compiler.interpreter import interpret
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.ops import OpTypeError, infer_type
from mncore_compiler.passes import Compilation, CompileRequest, mixed_precision, run_pipeline
from mncore_hdl.paths import repo_root
from torch import nn

ROOT = repo_root()
DEVICES = ["mncore2:auto", "pfvm:cpu"]
MIXED = {"float_dtype": "mixed"}


def rounded(t: torch.Tensor, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return t.to(dtype).float()


def linear_bound(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """docs/precision.md: |y - y_fp32| <= (2**-10 + (K + 1) * 2**-23) * (|x| @ |W|^T) + 1e-6."""
    k = x.shape[-1]
    return (2**-10 + (k + 1) * 2**-23) * (x.abs() @ weight.abs().T) + 1e-6


# -- the compiler -------------------------------------------------------------------------------


def test_linear_matmul_reads_float16_and_weights_are_stored_float16(seed):
    lin = nn.Linear(8, 4)
    program = compile_function(lambda d: {"y": lin(d["x"])}, {"x": torch.randn(2, 8)},
                               CompileRequest(options={"float_dtype": "mixed"}))
    graph = program.graph
    matmuls = [n for n in graph.nodes if n.op == "mixed_matmul"]
    assert len(matmuls) == 1 and matmuls[0].attrs["operand_dtype"] == "float16"
    assert not [n for n in graph.nodes if n.op == "matmul"]
    assert graph.constants["lin.weight"].dtype == torch.float16
    assert graph.constants["lin.bias"].dtype == torch.float32  # the bias add stays float32
    assert graph.inputs["x"].dtype == "float32"
    assert program.output_types["y"].dtype == "float32"
    assert program.layouts["lin.weight"].dtype == "float16"


@pytest.mark.parametrize("float_dtype", ["float32", "float"])
def test_other_float_dtypes_keep_plain_matmuls(float_dtype):
    lin = nn.Linear(8, 4)
    program = compile_function(lambda d: {"y": lin(d["x"])}, {"x": torch.randn(2, 8)},
                               CompileRequest(options={"float_dtype": float_dtype}))
    assert "mixed_matmul" not in [n.op for n in program.graph.nodes]
    assert program.graph.constants["lin.weight"].dtype == torch.float32


def test_pipeline_pass_acts_only_on_mixed():
    lin = nn.Linear(8, 4)
    graph = capture(lambda d: {"y": lin(d["x"])}, {"x": torch.randn(2, 8)}, float_dtype="mixed")
    assert "addmm" in [n.op for n in graph.nodes]  # captured in float32, as written
    plain = run_pipeline(Compilation(graph))
    mixed = run_pipeline(Compilation(graph, CompileRequest(options={"float_dtype": "mixed"})))
    assert "mixed_matmul" not in [n.op for n in plain.graph.nodes]
    assert "mixed_matmul" in [n.op for n in mixed.graph.nodes]
    assert "mixed-precision" in mixed.passes_run


def _graph(constants: dict[str, torch.Tensor], nodes: list[tuple[str, str, tuple, dict]],
           outputs: dict[str, str], inputs: dict[str, TensorType]) -> Graph:
    graph = Graph(inputs=dict(inputs), constants=dict(constants))
    for name, op, operands, attrs in nodes:
        types = [graph.type_of(o) for o in operands]
        graph.nodes.append(Node(name, op, operands, attrs, infer_type(op, types, attrs)))
    graph.outputs = dict(outputs)
    graph.verify()
    return graph


def test_a_constant_with_other_uses_stays_float32_but_its_matmul_rounds_it(seed):
    w = torch.randn(4, 4)
    graph = _graph({"w": w}, [
        ("mm", "matmul", ("x", "w"), {}),
        ("plus", "add", ("mm", "w"), {}),
    ], {"y": "plus"}, {"x": TensorType((4, 4), "float32")})
    result = mixed_precision(graph)
    result.verify()
    assert result.constants["w"].dtype == torch.float32
    x = torch.randn(4, 4)
    got = interpret(result, {"x": x})["y"]
    torch.testing.assert_close(got, rounded(x) @ rounded(w) + w, rtol=1e-6, atol=1e-6)
    assert graph.constants["w"] is w and graph.nodes[0].op == "matmul"  # input untouched


def test_a_returned_constant_stays_float32(seed):
    w = torch.randn(3, 3)
    graph = _graph({"w": w}, [("t", "permute", ("w",), {"dims": (1, 0)}),
                              ("mm", "matmul", ("x", "t"), {})],
                   {"y": "mm", "t": "t"}, {"x": TensorType((2, 3), "float32")})
    result = mixed_precision(graph)
    assert result.constants["w"].dtype == torch.float32
    assert result.type_of("t").dtype == "float32"


def test_float16_matmuls_are_left_alone():
    graph = _graph({}, [("mm", "matmul", ("a", "b"), {})], {"y": "mm"},
                   {"a": TensorType((2, 3), "float16"), "b": TensorType((3, 2), "float16")})
    assert [n.op for n in mixed_precision(graph).nodes] == ["matmul"]


def test_bfloat16_operands(seed):
    w = torch.randn(5, 3)
    graph = _graph({"w": w}, [("mm", "matmul", ("x", "w"), {})], {"y": "mm"},
                   {"x": TensorType((2, 5), "float32")})
    result = mixed_precision(graph, "bfloat16")
    assert result.constants["w"].dtype == torch.bfloat16
    x = torch.randn(2, 5)
    torch.testing.assert_close(interpret(result, {"x": x})["y"],
                               rounded(x, torch.bfloat16) @ rounded(w, torch.bfloat16),
                               rtol=1e-6, atol=1e-6)


def test_bad_operand_dtypes():
    graph = _graph({}, [("mm", "matmul", ("a", "b"), {})], {"y": "mm"},
                   {"a": TensorType((2, 3), "float32"), "b": TensorType((3, 2), "float32")})
    with pytest.raises(ValueError, match=r"operand_dtype must be one of \['float16', "
                                         r"'bfloat16'\], not 'float32'"):
        mixed_precision(graph, "float32")
    f32, f16 = TensorType((2, 2), "float32"), TensorType((2, 2), "float16")
    with pytest.raises(OpTypeError, match="operand_dtype must be one of"):
        infer_type("mixed_matmul", [f32, f32], {"operand_dtype": "float32"})
    with pytest.raises(OpTypeError, match="operands must be float32 or bfloat16, got float16"):
        infer_type("mixed_matmul", [f16, f32], {"operand_dtype": "bfloat16"})
    assert infer_type("mixed_matmul", [f16, f32], {"operand_dtype": "float16"}) == f32


# -- on the devices -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_linear_inference(tmp_path, seed, device):
    lin = nn.Linear(256, 128)
    x = torch.randn(32, 256)
    with Context(MNDevice(device)) as ctx:
        f = ctx.compile(lambda d: {"y": lin(d["x"])}, {"x": x}, storage.path(tmp_path / "lin"),
                        options=MIXED)
        y = f({"x": x})["y"].cpu()
    with torch.no_grad():
        exact = lin(x)
        operands_rounded = rounded(x) @ rounded(lin.weight).T + lin.bias
        bound = linear_bound(x, lin.weight)
    # The device computes what torch computes on operands rounded to float16.
    torch.testing.assert_close(y, operands_rounded, rtol=1e-6, atol=1e-6)
    assert bool(((y - exact).abs() <= bound).all()), f"seed={seed}"
    assert not torch.equal(y, exact)  # the rounding is there: this is not float32


@pytest.mark.parametrize("device", DEVICES)
def test_mlp_inference(tmp_path, seed, device):
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    x = torch.randn(4, 8, 256)
    with Context(MNDevice(device)) as ctx:
        f = ctx.compile(lambda d: {"y": mlp(d["x"])}, {"x": x}, storage.path(tmp_path / "mlp"),
                        options=MIXED)
        y = f({"x": x})["y"].cpu()
    with torch.no_grad():
        exact = mlp(x)
        hidden = torch.relu(rounded(x) @ rounded(mlp[0].weight).T + mlp[0].bias)
        operands_rounded = rounded(hidden) @ rounded(mlp[2].weight).T + mlp[2].bias
    torch.testing.assert_close(y, operands_rounded, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y, exact, rtol=2e-3, atol=2e-3)


def test_weights_take_half_the_dram_and_the_upload(tmp_path, seed):
    lin = nn.Linear(64, 32)
    x = torch.randn(4, 64)
    with Context(MNDevice("mncore2:auto")) as ctx:
        uploads = {}
        for dtype in ("float32", "mixed"):
            f = ctx.compile(lambda d: {"y": lin(d["x"])}, {"x": x},
                            storage.path(tmp_path / dtype), options={"float_dtype": dtype})
            uploads[dtype] = ctx.report().records[-1]
            assert uploads[dtype].kind == "load"
            assert f.input_specs["x"].dtype == torch.float32
            assert f.output_specs["y"].dtype == torch.float32
        saved = uploads["float32"].bytes["host"] - uploads["mixed"].bytes["host"]
        assert saved == lin.weight.numel() * 2


def test_codegen_dir_round_trip(tmp_path, seed):
    lin = nn.Linear(16, 8)
    x = torch.randn(3, 16)
    with Context(MNDevice("mncore2:auto")) as ctx:
        where = storage.path(tmp_path / "lin")
        compiled = ctx.compile(lambda d: {"y": lin(d["x"])}, {"x": x}, where, options=MIXED)
        loaded = ctx.load_codegen_dir(where)
        assert loaded.program.graph.constants["lin.weight"].dtype == torch.float16
        assert torch.equal(loaded({"x": x})["y"].cpu(), compiled({"x": x})["y"].cpu())


def test_float16_overflow_is_inf(tmp_path):
    # Documented: an operand beyond float16's range (65504) rounds to inf, as in torch.
    w = torch.eye(2)
    with Context(MNDevice("pfvm:cpu")) as ctx:
        f = ctx.compile(lambda d: {"y": d["x"] @ w}, {"x": torch.ones(2, 2)},
                        storage.path(tmp_path / "f"), options=MIXED)
        y = f({"x": torch.tensor([[1e5, 1.0], [2.0, 3.0]])})["y"].cpu()
    assert torch.isinf(y[0, 0]) and torch.equal(y[1], torch.tensor([2.0, 3.0]))


def test_a_misspelt_float_dtype_is_an_error_and_loads_nothing(tmp_path):
    with Context(MNDevice("mncore2:auto")) as ctx:
        before = len(ctx.report())
        with pytest.raises(ValueError, match=r"'float_dtype' must be one of \[.*'mixed'.*\], "
                                             r"not 'Mixed'"):
            ctx.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(2)},
                        storage.path(tmp_path / "f"), options={"float_dtype": "Mixed"})
        assert len(ctx.report()) == before
        assert not ctx.device.programs
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("argv", [[], ["pfvm:cpu"]])
def test_example_runs(tmp_path, argv):
    lines = run_example("linear_mixed.py", *argv, cwd=tmp_path).stdout.splitlines()
    assert any(f"on {argv[0] if argv else 'mncore2:auto'}" in line for line in lines)
    assert lines[-1] == "linear_mixed: mixed precision matches torch"
