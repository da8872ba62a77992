"""Capture errors: unsupported ops and functions that break the dict-of-tensors convention."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from mncore_compiler.capture import capture, supported_torch_ops
from mncore_compiler.errors import CaptureError, CompilerError, UnsupportedOperationError

X = {"x": torch.ones(3, 4)}


@pytest.mark.parametrize(
    ("fn", "aten"),
    [
        (lambda d: {"y": torch.sort(d["x"]).values}, "aten.sort.default"),
        (lambda d: {"y": d["x"][0]}, "aten.select.int"),
        (lambda d: {"y": d["x"][:, 1:3]}, "aten.slice.Tensor"),
        (lambda d: {"y": d["x"].clone().floor_()}, "aten.floor_.default"),
        (lambda d: {"y": torch.layer_norm(d["x"], [4])}, "aten.native_layer_norm.default"),
        (lambda d: {"y": d["x"] // 2}, "aten.floor_divide.default"),
    ],
    ids=["sort", "select", "slice", "inplace", "layer_norm", "floordiv"],
)
def test_unsupported_op_is_named(fn: Any, aten: str) -> None:
    with pytest.raises(UnsupportedOperationError, match=f"^{aten} is not supported") as info:
        capture(fn, X)
    message = str(info.value)
    assert "supported ops: " in message and "aten.add.Tensor" in message


def test_supported_op_list() -> None:
    ops = supported_torch_ops()
    assert ops == sorted(ops)
    for name in ("aten.addmm.default", "aten._softmax.default", "aten.cat.default"):
        assert name in ops


def test_random_numbers_are_a_clear_error() -> None:
    with pytest.raises(UnsupportedOperationError, match="aten.randn.default draws random"):
        capture(lambda d: {"y": d["x"] + torch.randn(3, 4)}, X)


def test_nll_total_weight_counts_the_targets_not_ignored() -> None:
    from mncore_compiler.interpreter import interpret

    labels = {"x": torch.ones(3, 4), "t": torch.tensor([0, 2, -100])}

    def nll(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"y": torch.ops.aten.nll_loss_forward(d["x"], d["t"], None, 1, -100)[1]}

    assert interpret(capture(nll, labels), labels)["y"].item() == 2.0


def test_unsupported_arguments() -> None:
    with pytest.raises(UnsupportedOperationError, match="^aten.sort.default is not supported"):
        capture(lambda d: {"y": torch.sort(d["x"]).values}, X)
    with pytest.raises(UnsupportedOperationError, match="with dtype=torch.float64"):
        capture(lambda d: {"y": d["x"].sum(1, dtype=torch.float64).float()}, X)
    with pytest.raises(UnsupportedOperationError, match="constant 'ones' has dtype float64"):
        capture(lambda d: {"y": d["x"] + torch.ones(4, dtype=torch.float64)}, X)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda d: d["x"] * 2, "must return a dict of str to torch.Tensor, not Tensor"),
        (lambda d: (d["x"],), "must return a dict of str to torch.Tensor, not tuple"),
        (lambda d: {"y": 3.0}, "output 'y' must be a torch.Tensor, not float"),
        (lambda d: {"y": [d["x"]]}, "output 'y' must be a torch.Tensor, not list"),
        (lambda d: {0: d["x"]}, "output names must be str, not int"),
        (lambda d: {}, "returned an empty dict"),
    ],
    ids=["tensor", "tuple", "float_output", "list_output", "int_name", "empty"],
)
def test_bad_return_value(fn: Any, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        capture(fn, X)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([torch.ones(2)], "sample_inputs must be a dict of str to torch.Tensor, not list"),
        ({"x": [1.0, 2.0]}, "sample input 'x' must be a torch.Tensor, not list"),
        ({"x": 1.0}, "sample input 'x' must be a torch.Tensor, not float"),
        ({1: torch.ones(2)}, "input names must be str, not int"),
        ({"x": torch.ones(2, dtype=torch.int8)}, "sample input 'x' has dtype int8"),
        ({"x": torch.ones(2, dtype=torch.float64)}, "sample input 'x' has dtype float64"),
    ],
    ids=["list", "list_value", "float_value", "int_name", "int8", "float64"],
)
def test_bad_sample_inputs(inputs: Any, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        capture(lambda d: {"y": d["x"]}, inputs)


def test_capture_error_is_a_type_error() -> None:
    assert issubclass(CaptureError, TypeError) and issubclass(CaptureError, CompilerError)
    assert issubclass(UnsupportedOperationError, CompilerError)


def test_bad_float_dtype_and_fn() -> None:
    with pytest.raises(ValueError, match="float_dtype must be one of .*, not 'float64'"):
        capture(lambda d: {"y": d["x"]}, X, float_dtype="float64")
    with pytest.raises(CaptureError, match="fn must be callable, not int"):
        capture(3, X)  # type: ignore[arg-type]


def test_errors_raised_by_the_function_propagate() -> None:
    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        raise KeyError("no such input")

    with pytest.raises(KeyError, match="no such input"):
        capture(fn, X)
