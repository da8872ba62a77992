"""The op table (``ops/``): each op's type rule rejects what it should; the table is whole."""

from __future__ import annotations

import pytest
from mncore_compiler.ops import OPS, get_op
from mncore_compiler.types import TensorType

F32 = "float32"


def t(*shape: int, dtype: str = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


@pytest.mark.parametrize(
    ("op", "operands", "attrs", "message"),
    [
        ("add", [t(2, 3), t(4)], {}, r"shapes \[2, 3\] and \[4\] do not broadcast"),
        ("reshape", [t(2, 3)], {"shape": (4, 2)}, "cannot reshape"),
        ("permute", [t(2, 3)], {"dims": (0, 0)}, "must be a permutation"),
        ("permute", [t(2, 3)], {"dims": (True, False)}, "must be a permutation"),
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
