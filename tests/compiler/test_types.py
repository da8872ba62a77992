"""IR value types (``types.py``): TensorType's checks."""

from __future__ import annotations

import pytest
import torch
from mncore_compiler.types import TensorType

F32 = "float32"


def t(*shape: int, dtype: str = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def test_tensor_type_checks() -> None:
    assert t(2, 3).numel == 6 and t().numel == 1 and t(2, 3).rank == 2
    assert str(t(2, 3, dtype="bfloat16")) == "bfloat16[2, 3]"
    with pytest.raises(ValueError, match="dtype must be one of .*, not 'float64'"):
        TensorType((2,), "float64")
    with pytest.raises(ValueError, match="shape must be a tuple of non-negative ints"):
        TensorType((2, -1), F32)
    with pytest.raises(ValueError, match="shape must be a tuple"):
        TensorType([2, 3], F32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not int8"):
        TensorType.of(torch.ones(2, dtype=torch.int8))
