"""Capture checks every op's result against torch's: a disagreement is a compiler bug naming
the op and the user's line, never a silent wrong dtype, and never before the unsupported ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from mncore_compiler.aten import DECOMPOSED, HANDLERS
from mncore_compiler.capture import capture
from mncore_compiler.errors import CompilerError, UnsupportedOperationError
from mncore_compiler.interpreter import interpret

SEED = 7
TensorDict = dict[str, torch.Tensor]

# One use per handled aten overload that takes a dtype= argument (what the call computes in,
# or what it creates), each in a dtype other than its default.
DTYPE_CALLS: dict[str, Callable[[TensorDict], torch.Tensor]] = {
    "aten._to_copy.default": lambda d: d["x"].to(torch.float16),
    "aten.to.dtype": lambda d: d["i"].to(torch.float32),
    "aten.arange.default": lambda d: torch.arange(6, dtype=torch.int32) + d["i"].flatten(),
    "aten.arange.start": lambda d: torch.arange(1, 7, dtype=torch.float32) * d["x"].flatten(),
    "aten.arange.start_step": lambda d: torch.arange(0, 12, 2, dtype=torch.int32)
    + d["i"].flatten(),
    "aten.cumsum.default": lambda d: torch.cumsum(d["i"], 0, dtype=torch.int32),
    "aten.cumprod.default": lambda d: torch.cumprod(d["i"], 1, dtype=torch.float32),
    "aten.empty.memory_format": lambda d: torch.empty(2, 3, dtype=torch.int32).zero_() + d["i"],
    "aten.empty_like.default": lambda d: torch.empty_like(d["x"], dtype=torch.int64).fill_(3),
    "aten.full.default": lambda d: torch.full((2, 3), 5, dtype=torch.int32) * d["i"],
    "aten.full_like.default": lambda d: torch.full_like(d["i"], 0.5, dtype=torch.float32),
    "aten.linalg_vector_norm.default": lambda d: torch.linalg.vector_norm(
        d["h"], dim=1, dtype=torch.float32),
    "aten.log_softmax.int": lambda d: torch.log_softmax(d["h"], 1, dtype=torch.float32),
    "aten.softmax.int": lambda d: torch.softmax(d["h"], 0, dtype=torch.float32),
    "aten._safe_softmax.default": lambda d: torch.ops.aten._safe_softmax(
        d["h"], 1, dtype=torch.float32),
    "aten.mean.default": lambda d: torch.mean(d["h"], dtype=torch.float32),
    "aten.mean.dim": lambda d: torch.mean(d["x"], 1, dtype=torch.float16),
    "aten.sum.default": lambda d: torch.sum(d["b"], dtype=torch.int32),
    "aten.sum.dim_IntList": lambda d: torch.sum(d["i"], 0, dtype=torch.float32),
    "aten.new_empty.default": lambda d: d["x"].new_empty((3,), dtype=torch.int32).fill_(2),
    "aten.new_empty_strided.default": lambda d: d["x"].new_empty_strided(
        (2, 3), (3, 1), dtype=torch.int32).fill_(4) + d["i"],
    "aten.empty_strided.default": lambda d: torch.empty_strided(
        (3, 2), (1, 3), dtype=torch.float16).fill_(0.5) * d["h"].t(),
    "aten.new_full.default": lambda d: d["x"].new_full((3,), 7, dtype=torch.int64),
    "aten.new_ones.default": lambda d: d["i"].new_ones((2,), dtype=torch.bool),
    "aten.new_zeros.default": lambda d: d["x"].new_zeros((2, 3), dtype=torch.int32) + d["i"],
    "aten.ones.default": lambda d: torch.ones(3, dtype=torch.int64) + d["i"][0],
    "aten.ones_like.default": lambda d: torch.ones_like(d["x"], dtype=torch.int32),
    "aten.scalar_tensor.default": lambda d: torch.where(d["b"], d["i"], torch.scalar_tensor(
        2, dtype=torch.int32)),
    "aten.zeros.default": lambda d: torch.zeros(2, 3, dtype=torch.bool) | d["b"],
    "aten.zeros_like.default": lambda d: torch.zeros_like(d["i"], dtype=torch.float16) + 1,
}

# Ops with a dtype argument that no single-op function reaches as written.
NOT_CALLED = {
    # clip_grad_norm_'s kernel, checked in tests/sdk/test_training_idioms.py.
    "aten._foreach_norm.Scalar",
}


def _inputs() -> TensorDict:
    g = torch.Generator().manual_seed(SEED)
    return {
        "x": torch.randn(2, 3, generator=g),
        "h": torch.randn(2, 3, generator=g).half(),
        "i": torch.randint(-4, 5, (2, 3), generator=g, dtype=torch.int32),
        "b": torch.rand(2, 3, generator=g) > 0.5,
    }


def _with_dtype_argument() -> set[str]:
    found = set()
    for key in set(HANDLERS) | DECOMPOSED:
        namespace, op, overload = key.split(".", 2)
        if namespace != "aten":  # another library's custom op: only loaded with its library
            continue
        schema = getattr(getattr(torch.ops.aten, op), overload)._schema
        if any(argument.name == "dtype" for argument in schema.arguments):
            found.add(key)
    return found


def test_every_op_with_a_dtype_argument_has_a_call() -> None:
    # A new handler of an op that takes dtype= must join DTYPE_CALLS (or NOT_CALLED).
    assert _with_dtype_argument() - NOT_CALLED == set(DTYPE_CALLS)


def test_a_function_mixing_every_dtype_argument_captures_as_torch_computes() -> None:
    inputs = _inputs()

    def mixed(d: TensorDict) -> dict[str, torch.Tensor]:
        return {key.removeprefix("aten."): call(d) for key, call in DTYPE_CALLS.items()}

    graph = capture(mixed, inputs)
    got = interpret(graph, inputs)
    with torch.no_grad():
        want = mixed(inputs)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        # float16 results: the interpreter rounds each op to float16 as torch does.
        torch.testing.assert_close(got[name], value, rtol=1e-3, atol=1e-3,
                                   msg=f"{name} (seed={SEED})")


def _wrong_dtype(b: Any, a: dict[str, Any], n: Any) -> str:
    # A handler with a bug: neg's result cast to int32.
    return b.emit("cast", [b.emit("neg", [a["self"]])], dtype="int32")


def test_a_handler_disagreeing_with_torch_is_a_compiler_bug_naming_op_and_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, "aten.neg.default", _wrong_dtype)

    def fn(d: TensorDict) -> dict[str, torch.Tensor]:
        return {"y": torch.neg(d["x"]) * 2}

    with pytest.raises(CompilerError) as caught:
        capture(fn, {"x": torch.ones(2)})
    assert type(caught.value) is CompilerError
    text = str(caught.value)
    assert "aten.neg.default captured as int32[2], torch computed [2] float32" in text
    assert "test_capture_dtypes.py" in text and "torch.neg(d[\"x\"]) * 2" in text
    assert "bug of the MN-Core compiler" in text


def test_unsupported_ops_are_listed_before_a_compiler_bug(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, "aten.neg.default", _wrong_dtype)

    def fn(d: TensorDict) -> dict[str, torch.Tensor]:
        y = torch.neg(d["x"])
        return {"y": torch.special.bessel_j0(y), "z": torch.special.bessel_y0(d["x"])}

    with pytest.raises(UnsupportedOperationError) as caught:
        capture(fn, {"x": torch.ones(2)})
    text = str(caught.value)
    assert [p.split(" ")[0] for p, _ in caught.value.problems] == [
        "aten.special_bessel_j0.default", "aten.special_bessel_y0.default"]
    assert "also hit 1 internal error(s)" in text and "aten.neg.default captured as" in text
