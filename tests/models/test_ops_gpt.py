"""The ops a GPT and its training step need, compiled on ``mncore2:auto`` against torch eager:
a seeded sweep over shapes with sizes 1, odd sizes and broadcasting, integer and bool dtypes
compared exactly, floats to ``rtol=1e-5, atol=1e-6``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mlsdk import storage

SHAPES = [(1,), (5,), (3, 7), (2, 1, 5), (2, 3, 4, 1)]
MATRIX_SHAPES = [(1, 1), (3, 7), (2, 5, 6)]


def _float(shape, g):
    return torch.randn(shape, generator=g)


def _int(shape, g):
    return torch.randint(-9, 10, shape, generator=g)


def _bool(shape, g):
    return torch.rand(shape, generator=g) > 0.5


# name: (function of {"x", "y"}, how x is made, how y is made (None: no y), shapes)
UNARY = {
    "log": (lambda d: torch.log(d["x"].abs() + 0.1), _float),
    "sin_cos": (lambda d: torch.sin(d["x"]) * torch.cos(d["x"]), _float),
    "exp_tanh_sigmoid": (lambda d: torch.exp(d["x"]) + torch.tanh(d["x"]) - torch.sigmoid(d["x"]),
                         _float),
    "sqrt_rsqrt": (lambda d: torch.sqrt(d["x"].abs()) + torch.rsqrt(d["x"].abs() + 1), _float),
    "pow_scalar": (lambda d: d["x"].pow(2) + d["x"].abs().pow(0.5) + 2 ** d["x"], _float),
    "pow_int": (lambda d: d["x"].pow(3), _int),
    "clamp": (lambda d: d["x"].clamp(-0.5, 0.7) + d["x"].clamp(min=0.1), _float),
    "clamp_int": (lambda d: d["x"].clamp(-3, 4), _int),
    "silu": (lambda d: F.silu(d["x"]), _float),
    "floor_divide_int": (lambda d: torch.floor_divide(d["x"], 4) + d["x"] // -3, _int),
    "floor_divide_float": (lambda d: torch.floor_divide(d["x"], 0.3), _float),
    "bitwise_not_bool": (lambda d: ~d["x"], _bool),
    "bitwise_not_int": (lambda d: ~d["x"], _int),
    "cumsum": (lambda d: torch.cumsum(d["x"], dim=-1), _float),
    "cumsum_int": (lambda d: torch.cumsum(d["x"], dim=0), _int),
    "cumsum_bool": (lambda d: torch.cumsum(d["x"], dim=0), _bool),
    "var": (lambda d: torch.var(d["x"], dim=-1, keepdim=True, correction=0) + d["x"].var(),
            _float),
    "vector_norm": (lambda d: torch.linalg.vector_norm(d["x"]) + torch.linalg.vector_norm(
        d["x"], ord=1, dim=-1).sum() + torch.linalg.vector_norm(d["x"], ord=float("inf")),
        _float),
    "softmax_dim0": (lambda d: F.softmax(d["x"], dim=0) + F.log_softmax(d["x"], dim=-1),
                     _float),
    "dropout_p0": (lambda d: F.dropout(d["x"], p=0.0, training=True), _float),
    "arange": (lambda d: d["x"] + torch.arange(d["x"].shape[-1]), _float),
    "stack": (lambda d: torch.stack([d["x"], d["x"] * 2], dim=-1), _float),
}

BINARY = {
    "pow": (lambda d: d["x"].abs().pow(d["y"]), _float, _float),
    "floor_divide": (lambda d: torch.floor_divide(d["x"], d["y"]), _float, _float),
    "floor_divide_int": (lambda d: torch.floor_divide(d["x"], d["y"].abs() + 1), _int, _int),
    "bitwise_and_or": (lambda d: (d["x"] & d["y"]) | ~d["y"], _bool, _bool),
    "bitwise_and_int": (lambda d: d["x"] & d["y"], _int, _int),
    "masked_fill": (lambda d: d["y"].masked_fill(d["x"], float("-inf")), _bool, _float),
    "masked_fill_tensor": (lambda d: d["y"].masked_fill(d["x"], d["y"].sum()), _bool, _float),
    "masked_fill_inplace": (lambda d: d["y"].clone().masked_fill_(d["x"], 0.5), _bool, _float),
    "masked_fill_int": (lambda d: d["y"].masked_fill(d["x"], -1), _bool, _int),
}


def _broadcast_partner(shape):
    """The shape with its leading dim (or its only dim) set to 1: it broadcasts to ``shape``."""
    return (1,) + tuple(shape[1:])


def _check(context, tmp_path, fn, inputs):
    compiled = context.compile(fn, inputs, storage.path(tmp_path / "f"))
    got, expected = compiled(inputs), fn(inputs)
    for name, value in expected.items():
        result = got[name].cpu()
        assert result.dtype == value.dtype
        if value.is_floating_point():
            torch.testing.assert_close(result, value, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            assert torch.equal(result, value)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op_matches_torch(context, tmp_path, seed, name, shape):
    fn, make = UNARY[name]
    inputs = {"x": make(shape, torch.Generator().manual_seed(seed))}
    _check(context, tmp_path, lambda d: {"y": fn(d)}, inputs)


@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_matches_torch(context, tmp_path, seed, name, shape, broadcast):
    fn, make_x, make_y = BINARY[name]
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": make_x(_broadcast_partner(shape) if broadcast else shape, g),
              "y": make_y(shape, g)}
    _check(context, tmp_path, lambda d: {"z": fn(d)}, inputs)
