"""The extension API of ``ops/registry.py`` and ``aten/registry.py``: an op added from outside.

Registering one IR op (type rule, reference, FLOPs) and one aten handler is all a new op
needs: capture, the verifier, the passes, the program and the interpreter take it as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from mncore_compiler.aten import HANDLERS, Builder, on
from mncore_compiler.aten.args import tensor_arg
from mncore_compiler.capture import capture, supported_torch_ops
from mncore_compiler.driver import compile_function
from mncore_compiler.errors import UnsupportedOperationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.ops import OPS, get_op, register
from mncore_compiler.ops.rules import per_output, same, unary_reference
from mncore_compiler.types import TensorType
from torch import fx

SEED = 23


@pytest.fixture
def registries() -> Iterator[None]:
    """Put both tables back as they were, whatever the test registered."""
    ops, handlers = dict(OPS), dict(HANDLERS)
    yield
    OPS.clear()
    OPS.update(ops)
    HANDLERS.clear()
    HANDLERS.update(handlers)


def _add_sinc() -> None:
    register("sinc", "elementwise", 1, (), same, unary_reference(torch.sinc), per_output(6))

    @on("sinc.default")
    def sinc(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        return b.emit("sinc", [tensor_arg(n, a["self"])])


def _fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"y": torch.sinc(d["x"]) * 2}


def test_an_op_registered_from_outside_compiles_and_runs(registries: None) -> None:
    torch.manual_seed(SEED)
    x = torch.randn(3, 5)
    with pytest.raises(UnsupportedOperationError, match="aten.sinc.default is not supported"):
        capture(_fn, {"x": x})
    _add_sinc()
    assert "aten.sinc.default" in supported_torch_ops()
    graph = capture(_fn, {"x": x})
    assert [node.op for node in graph.nodes] == ["sinc", "mul_scalar"]
    torch.testing.assert_close(interpret(graph, {"x": x})["y"], torch.sinc(x) * 2)
    program = compile_function(_fn, {"x": x})
    assert program.flops == 6 * 15 + 15
    torch.testing.assert_close(interpret(program.graph, {"x": x})["y"], torch.sinc(x) * 2)


def test_an_op_and_a_handler_are_registered_once(registries: None) -> None:
    _add_sinc()
    assert get_op("sinc").infer([TensorType((2,), "float32")], {}) == TensorType((2,), "float32")
    with pytest.raises(ValueError, match="IR op 'sinc' is already registered"):
        register("sinc", "elementwise", 1, (), same, unary_reference(torch.sinc), per_output(1))
    with pytest.raises(ValueError, match=r"aten.add.Tensor already has a handler"):
        on("add.Tensor")(lambda b, a, n: None)


def test_the_broadcast_rule_agrees_with_torch() -> None:
    # The rule is the kit's own (torch's broadcast_shapes is 30 times slower, and type rules
    # run for every node at every verification): shapes, and promotion with 0-d operands.
    import itertools

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from mncore_compiler.ops.registry import OpTypeError
    from mncore_compiler.ops.rules import broadcast
    from mncore_compiler.types import DTYPES, TensorType, dtype_to_torch

    shapes = st.lists(st.integers(0, 3), max_size=4).map(tuple)

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(a=shapes, b=shapes)
    def shapes_agree(a: tuple[int, ...], b: tuple[int, ...]) -> None:
        try:
            want: tuple[int, ...] | None = tuple(torch.broadcast_shapes(a, b))
        except RuntimeError:
            want = None
        try:
            got: tuple[int, ...] | None = broadcast(
                [TensorType(a, "float32"), TensorType(b, "float32")], {}).shape
        except OpTypeError:
            got = None
        assert got == want, (a, b)

    shapes_agree()
    for x, y in itertools.product(DTYPES, DTYPES):
        for sx, sy in itertools.product(((), (2,)), repeat=2):
            want = torch.result_type(torch.empty(sx, dtype=dtype_to_torch(x)),
                                     torch.empty(sy, dtype=dtype_to_torch(y)))
            got = broadcast([TensorType(sx, x), TensorType(sy, y)], {}).dtype
            assert dtype_to_torch(got) == want, (x, sx, y, sy)
