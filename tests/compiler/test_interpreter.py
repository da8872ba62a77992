"""The interpreter: input validation, output ownership, and each op's reference semantics."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mncore_compiler.interpreter import PreparedGraph, check_inputs, interpret
from mncore_compiler.ir import Graph, Node, TensorType
from mncore_compiler.ops import OPS

SEED = 99


def t(*shape: int, dtype: str = "float32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def graph_fixture() -> Graph:
    """y = permute(x) * c, plus the input and the constant returned as is."""
    return Graph(
        inputs={"x": t(2, 3), "h": t(3, dtype="float16")},
        constants={"c": torch.full((3, 1), 2.0)},
        nodes=[
            Node("p", "permute", ("x",), {"dims": (1, 0)}, t(3, 2)),
            Node("y", "mul", ("p", "c"), {}, t(3, 2)),
        ],
        outputs={"y": "y", "x_again": "x", "c": "c", "p": "p"},
    )


def good_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED)
    return {"x": torch.randn(2, 3, generator=g), "h": torch.randn(3, generator=g).half()}


def test_interpret_computes_and_returns_copies() -> None:
    graph, inputs = graph_fixture(), good_inputs()
    out = interpret(graph, inputs)
    assert list(out) == ["y", "x_again", "c", "p"]
    torch.testing.assert_close(out["y"], inputs["x"].t() * 2, msg=f"seed={SEED}")
    out["x_again"].zero_()
    out["c"].zero_()
    out["p"].zero_()
    assert inputs["x"].abs().sum() > 0 and graph.constants["c"].sum() == 6
    assert out["p"].is_contiguous()


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda d: d.pop("h"), ValueError, r"missing \['h'\], unexpected \[\]"),
        (lambda d: d.update(z=torch.ones(1)), ValueError, r"missing \[\], unexpected \['z'\]"),
        (lambda d: d.update(x=torch.ones(3, 2)), ValueError,
         r"input 'x' must have shape \[2, 3\], not \[3, 2\]"),
        (lambda d: d.update(h=torch.ones(3)), TypeError,
         "input 'h' must have dtype float16, not float32"),
        (lambda d: d.update(x=[[1.0] * 3] * 2), TypeError,
         "input 'x' must be a torch.Tensor, not list"),
    ],
    ids=["missing", "extra", "shape", "dtype", "not_tensor"],
)  # fmt: skip
def test_input_validation(change, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    inputs = good_inputs()
    change(inputs)
    with pytest.raises(error, match=message):
        interpret(graph_fixture(), inputs)


def test_inputs_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="inputs must be a dict of str to torch.Tensor, not list"):
        check_inputs(graph_fixture(), [torch.ones(2, 3)])  # type: ignore[arg-type]


def test_reference_disagreeing_with_declared_type_is_reported() -> None:
    # A node whose declared type is wrong (verify() would reject it) is caught while running.
    graph = Graph(
        inputs={"x": t(2)}, nodes=[Node("y", "relu", ("x",), {}, t(3))], outputs={"y": "y"}
    )
    with pytest.raises(RuntimeError, match=r"reference of %y \(relu\) gave \(2,\)"):
        interpret(graph, {"x": torch.ones(2)})


# One direct case per op: operand shapes, attributes and the torch expression it must equal.
CASES = {
    "neg": ([(3,)], {}, lambda x: -x),
    "abs": ([(3,)], {}, torch.abs),
    "relu": ([(3,)], {}, torch.relu),
    "sigmoid": ([(3,)], {}, torch.sigmoid),
    "tanh": ([(3,)], {}, torch.tanh),
    "exp": ([(3,)], {}, torch.exp),
    "reciprocal": ([(3,)], {}, torch.reciprocal),
    "sqrt": ([(3,)], {}, lambda x: torch.sqrt(x)),
    "rsqrt": ([(3,)], {}, torch.rsqrt),
    "gelu": ([(3,)], {"approximate": "tanh"},
             lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    "add": ([(2, 3), (3,)], {}, torch.add),
    "sub": ([(2, 3), (2, 1)], {}, torch.sub),
    "mul": ([(2, 3), ()], {}, torch.mul),
    "div": ([(2, 3), (2, 3)], {}, torch.div),
    "add_scalar": ([(3,)], {"scalar": 2.0}, lambda x: x + 2),
    "mul_scalar": ([(3,)], {"scalar": -3.0}, lambda x: x * -3),
    "sub_scalar": ([(3,)], {"scalar": 1.5, "reverse": True}, lambda x: 1.5 - x),
    "div_scalar": ([(3,)], {"scalar": 4.0, "reverse": True}, lambda x: 4 / x),
    "cast": ([(3,)], {"dtype": "bfloat16"}, lambda x: x.bfloat16()),
    "matmul": ([(2, 2, 3), (3, 4)], {}, torch.matmul),
    "mixed_matmul": ([(2, 3), (3, 4)], {"operand_dtype": "float16"},
                     lambda x, y: x.half().float() @ y.half().float()),
    "addmm": ([(4,), (2, 3), (3, 4)], {"alpha": 2.0, "beta": 0.5},
              lambda b, x, y: 0.5 * b + 2 * (x @ y)),
    "sum": ([(2, 3, 4)], {"dims": (0, 2), "keepdim": True}, lambda x: x.sum((0, 2), True)),
    "mean": ([(2, 3)], {"dims": (1,), "keepdim": False}, lambda x: x.mean(1)),
    "amax": ([(2, 3)], {"dims": (0, 1), "keepdim": False}, lambda x: x.amax((0, 1))),
    "softmax": ([(2, 3)], {"dim": 0}, lambda x: x.softmax(0)),
    "log_softmax": ([(2, 3)], {"dim": 1}, lambda x: x.log_softmax(1)),
    "reshape": ([(2, 3)], {"shape": (3, 1, 2)}, lambda x: x.reshape(3, 1, 2)),
    "permute": ([(2, 3, 4)], {"dims": (2, 0, 1)}, lambda x: x.permute(2, 0, 1)),
    "expand": ([(3, 1)], {"shape": (2, 3, 4)}, lambda x: x.expand(2, 3, 4)),
    "cat": ([(2, 1), (2, 3)], {"dim": 1}, lambda a, b: torch.cat([a, b], 1)),
    # Integer and bool values (an operand given as a tensor is used as it is).
    "where": ([torch.tensor([True, False, True]), (2, 3), (3,)], {}, torch.where),
    "maximum": ([(2, 3), (3,)], {}, torch.maximum),
    "minimum": ([(2, 3), (3,)], {}, torch.minimum),
    "argmax": ([(2, 3)], {"dim": 1, "keepdim": False}, lambda x: x.argmax(1)),
    "argmin": ([(2, 3)], {"dim": None, "keepdim": True}, lambda x: x.argmin(None, True)),
    "amin": ([(2, 3)], {"dims": (0,), "keepdim": True}, lambda x: x.amin(0, True)),
    "nll_loss": ([(4, 3), torch.tensor([0, 2, 1, 2])], {"reduction": "mean", "ignore_index": 1},
                 lambda x, t: torch.nn.functional.nll_loss(x, t, ignore_index=1)),
}  # fmt: skip
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    _fn = getattr(torch, _cmp)
    CASES[_cmp] = ([(2, 3), (3,)], {}, _fn)
    CASES[f"{_cmp}_scalar"] = ([(3,)], {"scalar": 1.0}, lambda x, _fn=_fn: _fn(x, 1.0))

# Convolution, pooling and upsampling, against torch.nn.functional.
_F = torch.nn.functional
_CONV = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}
_MAXP = {"kernel": (2, 3), "stride": (2, 1), "padding": (1, 1), "dilation": (1, 1),
         "ceil_mode": True}
_AVGP = {"kernel": (3, 2), "stride": (2, 2), "padding": (1, 0), "ceil_mode": False,
         "count_include_pad": False, "divisor_override": None}
_MAX_IDX = torch.tensor([[[[0, 2], [6, 8]]]])  # each gradient value goes to a corner of the 3x3
CASES.update({
    "conv": ([(2, 4, 5, 6), (6, 2, 3, 2)], _CONV, lambda x, w: _F.conv2d(
        x, w, None, (2, 1), (1, 0), (1, 2), 2)),
    "conv_input_grad": ([(2, 6, 3, 4), (6, 2, 3, 2)], {**_CONV, "input_shape": (2, 4, 5, 6)},
                        lambda dy, w: torch.nn.grad.conv2d_input(
                            (2, 4, 5, 6), w, dy, (2, 1), (1, 0), (1, 2), 2)),
    "conv_weight_grad": ([(2, 6, 3, 4), (2, 4, 5, 6)], {**_CONV, "weight_shape": (6, 2, 3, 2)},
                         lambda dy, x: torch.nn.grad.conv2d_weight(
                             x, (6, 2, 3, 2), dy, (2, 1), (1, 0), (1, 2), 2)),
    "max_pool": ([(2, 3, 5, 4)], _MAXP, lambda x: _F.max_pool2d(x, (2, 3), (2, 1), 1,
                                                                  ceil_mode=True)),
    "max_pool_indices": ([(2, 3, 5, 4)], _MAXP, lambda x: _F.max_pool2d(
        x, (2, 3), (2, 1), 1, ceil_mode=True, return_indices=True)[1]),
    "max_pool_backward": ([(1, 1, 2, 2), (1, 1, 3, 3), _MAX_IDX],
                          {**_MAXP, "kernel": (2, 2), "stride": (1, 1), "padding": (0, 0),
                           "ceil_mode": False},
                          lambda dy, x, i: torch.zeros(1, 1, 9).index_add(
                              2, i.flatten(), dy.flatten().reshape(1, 1, 4)).reshape(1, 1, 3, 3)),
    "avg_pool": ([(2, 3, 5, 4)], _AVGP, lambda x: _F.avg_pool2d(
        x, (3, 2), 2, (1, 0), count_include_pad=False)),
    "avg_pool_backward": ([(1, 1, 2, 2)], {**_AVGP, "kernel": (2, 2), "padding": (0, 0),
                                           "input_shape": (1, 1, 4, 4)},
                          lambda dy: dy.repeat_interleave(2, 2).repeat_interleave(2, 3) / 4),
    "adaptive_avg_pool": ([(2, 3, 5, 7)], {"output_size": (2, 3)},
                          lambda x: _F.adaptive_avg_pool2d(x, (2, 3))),
    "adaptive_avg_pool_backward": ([(1, 2, 1, 1)], {"input_shape": (1, 2, 3, 2)},
                                   lambda dy: dy.expand(1, 2, 3, 2) / 6),
    "upsample_nearest": ([(2, 3, 2, 3)], {"output_size": (4, 9), "scales": (None, None)},
                         lambda x: _F.interpolate(x, size=(4, 9), mode="nearest")),
    "upsample_nearest_backward": ([(1, 2, 4)], {"output_size": (4,), "scales": (2.0,),
                                                "input_shape": (1, 2, 2)},
                                  lambda dy: dy.reshape(1, 2, 2, 2).sum(3)),
})  # fmt: skip


def test_every_op_has_a_case() -> None:
    assert sorted(CASES) == sorted(OPS)


# Indexing and the math ops a GPT needs (integer and bool operands given as tensors).
_IDX = torch.tensor([2, 0, 2])
_BITS = torch.tensor([[True, False], [True, True]])
CASES.update({
    "slice": ([(2, 7)], {"dim": 1, "start": 1, "end": 6, "step": 2}, lambda x: x[:, 1:6:2]),
    "index_select": ([(3, 4), _IDX], {"dim": 0}, lambda x, i: x[i]),
    "gather": ([(3, 4), torch.tensor([[3, 0], [1, 1], [2, 0]])], {"dim": 1},
               lambda x, i: x.gather(1, i)),
    "index_add": ([(3, 2), _IDX, (3, 2)], {"dim": 0}, lambda x, i, v: x.index_add(0, i, v)),
    "scatter_add": ([(3, 2), torch.tensor([[2, 0], [2, 1]]), (2, 2)], {"dim": 0},
                    lambda x, i, v: x.scatter_add(0, i, v)),
    "cumsum": ([(2, 5)], {"dim": 1}, lambda x: x.cumsum(1)),
    "cumprod": ([(2, 5)], {"dim": 1}, lambda x: x.cumprod(1)),
    "sign": ([torch.tensor([-2.0, 0.0, 3.5])], {}, torch.sign),
    "scatter": ([(3, 2), torch.tensor([[2, 0], [1, 1]]), (2, 2)], {"dim": 0},
                lambda x, i, v: x.scatter(0, i, v)),
    "argsort": ([torch.tensor([[3.0, 1.0, 3.0, -2.0]])], {"dim": 1, "descending": True},
                lambda x: torch.tensor([[0, 2, 1, 3]])),
    "histc": ([torch.tensor([0.0, 0.5, 0.99, 1.0, 2.0, -1.0])],
              {"bins": 2, "min": 0.0, "max": 1.0},
              lambda x: torch.tensor([1.0, 3.0])),
    "grouped_mm": ([(5, 3), (2, 3, 4), torch.tensor([2, 4], dtype=torch.int32)], {},
                   lambda x, w, o: torch.cat([x[:2] @ w[0], x[2:4] @ w[1], torch.zeros(1, 4)])),
    "grouped_mm_weight_grad": ([(5, 3), (5, 4), torch.tensor([0, 3])], {},
                               lambda x, g, o: torch.stack([torch.zeros(3, 4),
                                                            x[:3].T @ g[:3]])),
    "log": ([(3,)], {}, torch.log),
    "log1p": ([(3,)], {}, torch.log1p),
    "sin": ([(3,)], {}, torch.sin),
    "cos": ([(3,)], {}, torch.cos),
    "erf": ([(3,)], {}, torch.erf),
    "floor": ([torch.tensor([-1.5, -0.0, 0.5, 2.0])], {},
              lambda x: torch.tensor([-2.0, -0.0, 0.0, 2.0])),
    "ceil": ([torch.tensor([-1.5, 0.25, 2.0])], {}, lambda x: torch.tensor([-1.0, 1.0, 2.0])),
    "trunc": ([torch.tensor([-1.5, 0.75, 2.0])], {}, lambda x: torch.tensor([-1.0, 0.0, 2.0])),
    "round": ([torch.tensor([0.5, 1.5, 2.5, -0.5, 2.6])], {},
              lambda x: torch.tensor([0.0, 2.0, 2.0, -0.0, 3.0])),  # half to even, as torch
    "pow_scalar": ([(3,)], {"scalar": 2.5, "reverse": True}, lambda x: 2.5 ** x),
    "pow": ([(2, 3), (3,)], {}, torch.pow),
    "clamp": ([(2, 3)], {"min": 0.7, "max": None}, lambda x: x.clamp(min=0.7)),
    "floor_divide": ([torch.tensor([7, -7, 3]), torch.tensor([2, 2, -2])], {},
                     torch.floor_divide),
    "bitwise_not": ([_BITS], {}, torch.bitwise_not),
    "bitwise_and": ([_BITS, torch.tensor([True, False])], {}, torch.bitwise_and),
    "bitwise_or": ([_BITS, torch.tensor([False, False])], {}, torch.bitwise_or),
    "bitwise_xor": ([torch.tensor([5, 3]), torch.tensor([1, 1])], {}, torch.bitwise_xor),
})  # fmt: skip
# Tensor-indexed reads and writes (ops/advanced_indexing.py); negative indices count from the end.
_ROWS, _COLS = torch.tensor([[0, -1], [1, 2]]), torch.tensor([1, 0])
CASES.update({
    "index": ([(3, 4, 2), _ROWS, _COLS], {"dims": (0, 2)}, lambda x, i, j: x[i, :, j]),
    "index_put": ([(3, 2), (2,), torch.tensor([2, 0])], {"dims": (0,), "accumulate": True},
                  lambda x, v, i: x.index_put((i,), v, accumulate=True)),
    "index_copy": ([(2, 5, 3), torch.tensor([4, 1]), (2, 2, 3)], {"dim": 1},
                   lambda x, i, v: x.index_copy(1, i, v)),
})  # fmt: skip

# timm's activations and adaptive max pooling (ops/activations.py, ops/adaptive_pooling.py),
# against their formulas; operands shifted to cross the activations' breakpoints.
_ACT = torch.tensor([[-4.0, -3.0, -1.0, 0.0], [0.5, 2.0, 3.0, 5.0]])
_GRAD = torch.tensor([[1.0, -2.0, 0.5, 3.0], [-1.0, 2.0, 4.0, 0.25]])
_POOL_IDX = torch.tensor([[[[2], [4]]]])  # each row's maximum of a 2x3 plane
CASES.update({
    "hardswish": ([_ACT], {}, lambda x: x * (x + 3).clamp(0, 6) / 6),
    "hardsigmoid": ([_ACT], {}, lambda x: (x + 3).clamp(0, 6) / 6),
    "mish": ([_ACT], {}, lambda x: x * torch.tanh(torch.log1p(torch.exp(x)))),
    "leaky_relu": ([_ACT], {"negative_slope": 0.1}, lambda x: torch.where(x > 0, x, 0.1 * x)),
    "elu": ([_ACT], {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5},
            lambda x: 2.0 * torch.where(x > 0, x, 0.5 * torch.expm1(1.5 * x))),
    "hardswish_backward": ([_GRAD, _ACT], {}, lambda g, x: g * torch.where(
        x <= -3, 0.0, torch.where(x < 3, x / 3 + 0.5, 1.0))),  # torch's kernel: open at +-3
    "hardsigmoid_backward": ([_GRAD, _ACT], {}, lambda g, x: torch.where(
        (x > -3) & (x < 3), g / 6, 0.0)),
    "mish_backward": ([_GRAD, _ACT], {}, lambda g, x: g * (
        torch.tanh(F.softplus(x)) + x * torch.sigmoid(x) * (1 - torch.tanh(F.softplus(x)) ** 2))),
    "hardtanh_backward": ([_GRAD, _ACT], {"min": -3.0, "max": 2.0},
                          lambda g, x: torch.where((x > -3) & (x < 2), g, 0.0)),
    "leaky_relu_backward": ([_GRAD, _ACT], {"negative_slope": 0.1, "self_is_result": False},
                            lambda g, x: torch.where(x > 0, g, 0.1 * g)),
    "elu_backward": ([_GRAD, _ACT], {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5,
                                      "is_result": False},
                     lambda g, x: torch.where(x > 0, 2.0 * g,
                                              g * 2.0 * 0.5 * 1.5 * torch.exp(1.5 * x))),
    "adaptive_max_pool": ([(2, 3, 5, 7)], {"output_size": (2, 3)},
                          lambda x: torch.stack([torch.stack([
                              x[..., (i * 5) // 2:-(-(i + 1) * 5 // 2),
                                (j * 7) // 3:-(-(j + 1) * 7 // 3)].amax((-2, -1))
                              for j in range(3)], -1) for i in range(2)], -2)),
    "adaptive_max_pool_indices": ([torch.tensor([[[[1.0, 5.0], [7.0, 2.0]]]])],
                                  {"output_size": (1, 1)}, lambda x: torch.tensor([[[[2]]]])),
    "adaptive_max_pool_backward": ([(1, 1, 2, 1), (1, 1, 2, 3), _POOL_IDX], {},
                                   lambda g, x, i: torch.zeros(1, 1, 6).index_add(
                                       2, i.flatten(), g.reshape(1, 1, 2)).reshape(1, 1, 2, 3)),
})  # fmt: skip


def _single_op(op: str) -> tuple[Graph, list[torch.Tensor]]:
    """The graph of one node of ``op`` over the inputs of ``CASES[op]``, and those inputs."""
    shapes, attrs, _ = CASES[op]
    g = torch.Generator().manual_seed(SEED)
    tensors = [s if isinstance(s, torch.Tensor) else torch.rand(s, generator=g) + 0.5
               for s in shapes]
    names = [f"in{i}" for i in range(len(shapes))]
    types = [TensorType.of(x) for x in tensors]
    result = OPS[op].infer(types, attrs)
    graph = Graph(
        inputs=dict(zip(names, types, strict=True)),
        nodes=[Node("out", op, tuple(names), attrs, result)],
        outputs={"out": "out"},
    )
    graph.verify()
    return graph, tensors


@pytest.mark.parametrize("op", sorted(CASES))
def test_single_op_graph(op: str) -> None:
    _, attrs, expect = CASES[op]
    graph, tensors = _single_op(op)
    got = interpret(graph, dict(zip(graph.inputs, tensors, strict=True)))["out"]
    torch.testing.assert_close(got, expect(*tensors), msg=lambda m: f"{op} (seed={SEED}): {m}")
    assert OPS[op].flops([TensorType.of(x) for x in tensors], attrs) >= 0


def test_empty_dims_reduce_nothing() -> None:
    # torch reads dim=[] as "all dims"; the IR reads it as "none" (only 0-d inputs produce it).
    graph = Graph(
        inputs={"x": t()},
        nodes=[Node("s", "sum", ("x",), {"dims": (), "keepdim": False}, t())],
        outputs={"s": "s"},
    )
    graph.verify()
    assert interpret(graph, {"x": torch.tensor(3.0)})["s"].item() == 3.0


@pytest.mark.parametrize("op", sorted(o for o in CASES if OPS[o].inline is not None))
def test_inline_form_is_the_reference_bit_for_bit(op: str) -> None:
    # The generated code runs an op's inline form (interpreter_codegen): the same torch call
    # as its reference, so the same bits, on the first (checked) run and on later ones.
    graph, tensors = _single_op(op)
    expected = OPS[op].reference(tensors, CASES[op][1])
    prepared = PreparedGraph(graph)
    for _ in range(2):
        got = prepared(dict(zip(graph.inputs, tensors, strict=True)))["out"]
        assert got.dtype == expected.dtype and torch.equal(got, expected), op
