"""The IR's value types: element dtypes and :class:`TensorType` (shape and dtype)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "DTYPES",
    "FLOAT_IR_DTYPES",
    "TensorType",
    "dtype_from_torch",
    "dtype_to_torch",
]

_TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
DTYPES: tuple[str, ...] = tuple(_TORCH_DTYPES)
"""The element types an IR value may have."""
FLOAT_IR_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
"""The floating-point ones among :data:`DTYPES`."""


def dtype_to_torch(dtype: str) -> torch.dtype:
    """Return the torch dtype of an IR dtype name such as ``"float32"``."""
    try:
        return _TORCH_DTYPES[dtype]
    except KeyError:
        raise ValueError(f"IR dtype must be one of {list(DTYPES)}, not {dtype!r}") from None


def dtype_from_torch(dtype: torch.dtype) -> str:
    """Return the IR dtype name of a torch dtype; ``TypeError`` when it has none."""
    for name, candidate in _TORCH_DTYPES.items():
        if candidate == dtype:
            return name
    raise TypeError(f"dtype must be one of {list(DTYPES)}, not {str(dtype).replace('torch.', '')}")


@dataclass(frozen=True)
class TensorType:
    """Static type of an IR value.

    Parameters
    ----------
    shape : tuple of int
        Sizes of each dimension; ``()`` for a 0-d tensor.
    dtype : str
        One of :data:`DTYPES`.
    """

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in self.shape
        ):
            raise ValueError(
                f"TensorType shape must be a tuple of non-negative ints, not {self.shape!r}"
            )
        if self.dtype not in DTYPES:
            raise ValueError(f"TensorType dtype must be one of {list(DTYPES)}, not {self.dtype!r}")

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorType:
        """Return the type of a torch tensor (``TypeError`` for a dtype not in DTYPES)."""
        return cls(tuple(int(d) for d in tensor.shape), dtype_from_torch(tensor.dtype))

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numel(self) -> int:
        """Number of elements."""
        count = 1
        for d in self.shape:
            count *= d
        return count

    @property
    def torch_dtype(self) -> torch.dtype:
        """The matching torch dtype."""
        return dtype_to_torch(self.dtype)

    def to_json(self) -> dict[str, Any]:
        """Return ``{"shape": [...], "dtype": ...}``."""
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorType:
        """Inverse of :meth:`to_json`."""
        return cls(tuple(data["shape"]), data["dtype"])

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"
