"""Element types a layout can hold, their lanes inside the LW, and raw-bit conversion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ElementType", "element_type", "DTYPES", "to_bits", "from_bits"]

LW_BITS = 64


@dataclass(frozen=True)
class ElementType:
    """An element type: its name, width, and the lane level that packs it into an LW.

    ``W`` lanes are the two 32-bit halves of an LW, ``H`` lanes its four 16-bit quarters;
    lane 0 is the least significant.
    """

    name: str
    bits: int
    lane_level: str

    @property
    def lanes(self) -> int:
        """Elements of this type in one LW."""
        return LW_BITS // self.bits

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    @property
    def raw(self) -> type:
        """The numpy unsigned type holding one element's bits."""
        return np.uint32 if self.bits == 32 else np.uint16


DTYPES: dict[str, ElementType] = {
    "float32": ElementType("float32", 32, "W"),
    "float16": ElementType("float16", 16, "H"),
    "bfloat16": ElementType("bfloat16", 16, "H"),
}

_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
            "bf16": "bfloat16"}


def element_type(dtype: Any) -> ElementType:
    """Resolve a dtype given as a name (``"float32"``, ``"half"``...) or a ``torch.dtype``."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in DTYPES:
        raise TypeError(
            f"Element type must be one of {', '.join(DTYPES)}, not {dtype!r}"
        )
    return DTYPES[name]


def to_bits(tensor: Any) -> np.ndarray:
    """The raw bits of a torch tensor as a C-ordered numpy array of unsigned integers."""
    import torch

    etype = element_type(tensor.dtype)
    signed = torch.int32 if etype.bits == 32 else torch.int16
    flat = tensor.detach().cpu().contiguous().view(signed).numpy()
    return flat.view(etype.raw)


def from_bits(bits: np.ndarray, dtype: Any) -> Any:
    """A torch tensor of ``dtype`` holding ``bits`` (the inverse of :func:`to_bits`).

    A C-contiguous array of the raw type is used as it is: the tensor shares its memory.
    """
    import torch

    etype = element_type(dtype)
    signed = np.int32 if etype.bits == 32 else np.int16
    torch_dtype = getattr(torch, etype.name)
    shape = np.shape(bits)
    array = np.ascontiguousarray(bits, dtype=etype.raw).reshape(-1).view(signed)
    # view(dtype) promotes a 0-d tensor to 1-d; reshape restores the shape it was given.
    return torch.from_numpy(array).view(torch_dtype).reshape(shape)
