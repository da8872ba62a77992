"""Capture errors: unsupported ops and functions that break the dict-of-tensors convention."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from mncore_compiler.capture import capture, supported_torch_ops
from mncore_compiler.errors import (
    CaptureError,
    CompilerError,
    TraceError,
    UnsupportedOperationError,
)

X = {"x": torch.ones(3, 4)}


@pytest.mark.parametrize(
    ("fn", "aten"),
    [
        (lambda d: {"y": torch.kthvalue(d["x"], 1, keepdim=True).values}, "aten.kthvalue.default"),
        (lambda d: {"y": torch.special.bessel_j0(d["x"])}, "aten.special_bessel_j0.default"),
        (lambda d: {"y": torch.roll(d["x"], 1, 1)}, "aten.roll.default"),
        (lambda d: {"y": d["x"].clone().sinh_()}, "aten.sinh_.default"),
        (lambda d: {"y": torch.logcumsumexp(d["x"], 1)}, "aten.logcumsumexp.default"),
        (lambda d: {"y": d["x"] % 2}, "aten.remainder.Scalar"),
    ],
    ids=["kthvalue", "bessel_j0", "roll", "inplace", "logcumsumexp", "remainder"],
)
def test_unsupported_op_is_named(fn: Any, aten: str) -> None:
    with pytest.raises(UnsupportedOperationError, match=f"^{aten} is not supported") as info:
        capture(fn, X)
    message = str(info.value)
    # A few lines: the op, the user's line that produced it, where the supported set is.
    lines = message.splitlines()
    assert len(lines) == 3, message
    assert lines[1].startswith("  at tests/compiler/test_capture_errors.py:")
    assert "lambda" in lines[1]
    assert lines[2] == "Supported ops: mlsdk.supported_ops(), listed in docs/ops.md."
    assert "aten.add.Tensor" not in message
    assert info.value.problems == ((lines[0], lines[1].removeprefix("  at ")),)


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
    with pytest.raises(UnsupportedOperationError, match="^aten.kthvalue.default is not supported"):
        capture(lambda d: {"y": torch.kthvalue(d["x"], 1, keepdim=True).values}, X)
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

    with pytest.raises(KeyError, match="no such input") as info:
        capture(fn, X)
    # With a note of what differs from an eager call (transformers' export paths).
    assert any("torch.compiler.is_exporting() True" in note
               for note in getattr(info.value, "__notes__", []))


class _Missing(torch.nn.Module):
    """Three unsupported ops, one of them twice, and supported ones around them."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.kthvalue(x, 1, keepdim=True).values * 2
        x = torch.special.bessel_j0(x)
        y = torch.logcumsumexp(x, 1)
        return torch.kthvalue(y, 1, keepdim=True).values + x.sinh_()


def test_every_unsupported_op_is_listed_with_its_line() -> None:
    model = _Missing()
    with pytest.raises(UnsupportedOperationError) as info:
        capture(lambda d: {"y": model(d["x"]).relu()}, X)
    message = str(info.value)
    ops = [problem.split(" ", 1)[0] for problem, _ in info.value.problems]
    assert ops == ["aten.kthvalue.default", "aten.special_bessel_j0.default",
                   "aten.logcumsumexp.default",
                   "aten.sinh_.default"]
    assert message.startswith("4 problems stop the MN-Core compiler")
    assert len(message.splitlines()) == 1 + 2 * len(ops) + 1, message
    assert "(and 1 more)" in message  # kthvalue, on two lines
    for _, where in info.value.problems:
        assert where is not None and where.startswith("tests/compiler/test_capture_errors.py:")
        assert " in forward: " in where
    assert "x = torch.kthvalue(x, 1, keepdim=True).values * 2" in message
    assert "y = torch.logcumsumexp(x, 1)" in message


def test_ops_computed_from_an_unsupported_one_are_not_reported() -> None:
    # relu and add of a kthvalue's result are supported: only kthvalue is the problem.
    with pytest.raises(UnsupportedOperationError) as info:
        capture(lambda d: {"y": torch.kthvalue(d["x"], 1, keepdim=True).values.relu() + 1}, X)
    assert len(info.value.problems) == 1


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda d: {"y": d["x"] @ torch.ones(5, 2)},
         r"RuntimeError while tracing the function: mat1 and mat2 shapes cannot be multiplied"
         r".*\n  at tests/compiler/test_capture_errors.py:\d+ in <lambda>: .*torch.ones\(5, 2\)"
         r".*\nRun the function eagerly"),
        (lambda d: {"y": d["x"] * d["x"].sum().item()},
         r"read a tensor's value in Python \(\.item\(\).*\n  at .*\.item\(\)"
         r".*\nA compiled function is one fixed program"),
    ],
    ids=["shapes", "item"],
)
def test_torch_errors_while_tracing_name_the_line(fn: Any, message: str) -> None:
    with pytest.raises(TraceError, match=message) as info:
        capture(fn, X)
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_data_dependent_control_flow_is_a_trace_error() -> None:
    def branchy(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if d["x"].sum() > 0:
            return {"y": d["x"] * 2}
        return {"y": d["x"]}

    with pytest.raises(TraceError, match=r"(?s)value in Python.*in branchy: if d\["):
        capture(branchy, X)


def test_a_foreach_kernel_says_to_pass_foreach_false() -> None:
    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"y": torch._foreach_add([d["x"]], 2.0)[0]}

    with pytest.raises(UnsupportedOperationError,
                       match=r"^aten._foreach_add.Scalar is a multi-tensor .*foreach=False"):
        capture(fn, X)


def test_an_in_place_update_of_a_transposed_view_writes_through() -> None:
    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        y = d["x"] * torch.tensor([1.0, 2.0, 3.0, 4.0])
        y.t().mul_(3.0).add_(1.0)  # a whole-tensor view (as a Linear weight's .grad is)
        return {"y": y}

    from mncore_compiler.interpreter import interpret

    x = {"x": torch.randn(3, 4)}
    torch.testing.assert_close(interpret(capture(fn, x), x)["y"], fn(x)["y"])


def test_an_in_place_update_through_another_view_is_named() -> None:
    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        y = d["x"] * 1
        y.unsqueeze(0).expand(1, 3, 4).add_(1.0)
        return {"y": y}

    with pytest.raises(UnsupportedOperationError,
                       match=r"^aten.add_.Tensor updates an aten.expand.default view of a tensor"):
        capture(fn, X)
