"""Element types a layout can hold, their lanes inside the LW, and raw-bit conversion.

Floats and ``int32`` are stored as their own bits. Two types are stored *narrowed*, in a lane
the layout converter moves (it moves 16- and 32-bit lanes only): ``int64`` as a two's-complement
int32 (32-bit ``W`` lane) and ``bool`` as an int16 holding 0 or 1 (16-bit ``H`` lane). Every value
of the narrowed lane round-trips exactly; an ``int64`` value outside the int32 range cannot be
laid out, and :func:`check_representable` says which one (see ``docs/dtypes.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ElementType", "ElementRangeError", "element_type", "DTYPES", "to_bits", "from_bits",
           "check_representable", "stored_tensor", "dtype_name"]

LW_BITS = 64


@dataclass(frozen=True)
class ElementType:
    """An element type: its name, width, and the lane level that packs it into an LW.

    ``W`` lanes are the two 32-bit halves of an LW, ``H`` lanes its four 16-bit quarters;
    lane 0 is the least significant. ``stored_as`` names the torch dtype whose bits fill a
    lane when it differs from ``name`` (a narrowed type: ``int64`` stored as ``int32``,
    ``bool`` as ``int16``); empty when the element is stored as its own bits.
    """

    name: str
    bits: int
    lane_level: str
    stored_as: str = ""

    @property
    def narrowed(self) -> bool:
        """True when a lane holds the value converted to ``stored_as``, not its own bits."""
        return bool(self.stored_as)

    @property
    def value_range(self) -> tuple[int, int] | None:
        """``(lowest, highest)`` value an integer element holds on the device; None for floats
        and bool (every value of those round-trips)."""
        if self.name == "int32" or self.stored_as == "int32":
            return -(1 << 31), (1 << 31) - 1
        return None

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
    "int32": ElementType("int32", 32, "W"),
    "int64": ElementType("int64", 32, "W", stored_as="int32"),
    "bool": ElementType("bool", 16, "H", stored_as="int16"),
}

_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
            "bf16": "bfloat16", "int": "int32", "long": "int64"}


class ElementRangeError(ValueError):
    """A value its element type cannot hold in a device lane (an int64 outside int32)."""


def element_type(dtype: Any) -> ElementType:
    """Resolve a dtype given as a name (``"float32"``, ``"half"``...) or a ``torch.dtype``."""
    try:
        hit = _RESOLVED.get(dtype)
    except TypeError:  # unhashable: not a dtype; _resolve says so
        return _resolve(dtype)
    if hit is not None:
        return hit
    etype = _resolve(dtype)
    if len(_RESOLVED) < 64:
        _RESOLVED[dtype] = etype
    return etype


#: Names and torch dtypes already resolved (both are hashable and immutable).
_RESOLVED: dict[Any, ElementType] = {}


def dtype_name(dtype: Any) -> str:
    """The kit's name of a dtype: ``torch.float32`` -> ``"float32"``; a string is returned as it
    is, and anything else by its ``str`` with any ``torch.`` prefix dropped."""
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")


def _resolve(dtype: Any) -> ElementType:
    name = dtype_name(dtype)
    name = _ALIASES.get(name, name)
    if name not in DTYPES:
        raise TypeError(
            f"Element type must be one of {', '.join(DTYPES)}, not {dtype!r}"
        )
    return DTYPES[name]


def check_representable(tensor: Any) -> None:
    """Raise :class:`ElementRangeError` when an element of ``tensor`` does not fit its lane.

    Only ``int64`` can fail: it is held on the device as an int32. The message names the first
    offending value, its index and the range a lane holds.
    """
    import torch

    etype = element_type(tensor.dtype)
    bounds = etype.value_range
    if bounds is None or not etype.narrowed or tensor.numel() == 0:
        return
    low, high = bounds
    t = tensor.detach()
    if t.dtype != torch.bool:
        # One reduction says whether any value is outside (a quarter of the comparisons' time).
        least, most = torch.aminmax(t)
        if int(least) >= low and int(most) <= high:
            return
    outside = (t < low) | (t > high)
    if not bool(outside.any()):
        return
    flat = int(torch.nonzero(outside.reshape(-1))[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(t.shape)))
    value = int(t.reshape(-1)[flat])
    raise ElementRangeError(
        f"{etype.name} value {value} at index {index} is outside [{low}, {high}], the range the "
        f"device holds {etype.name} elements in (a {etype.bits}-bit {etype.stored_as} lane); "
        f"keep {etype.name} values within it (class labels, counts and indices do)"
    )


def stored_tensor(tensor: Any, etype: ElementType) -> Any:
    """``tensor`` as the torch dtype whose bits fill its lanes (range-checked if narrowed)."""
    import torch

    t = tensor.detach()
    if not t.is_cpu:
        t = t.cpu()
    if etype.narrowed:
        check_representable(t)
        t = t.to(getattr(torch, etype.stored_as))
    return t


def to_bits(tensor: Any) -> np.ndarray:
    """The raw bits of a torch tensor as a C-ordered numpy array of unsigned integers.

    A narrowed type (``int64``, ``bool``) gives the bits of its stored form;
    :class:`ElementRangeError` when a value does not fit it.
    """
    import torch

    etype = element_type(tensor.dtype)
    signed = torch.int32 if etype.bits == 32 else torch.int16
    flat = stored_tensor(tensor, etype).contiguous().view(signed).numpy()
    return flat.view(etype.raw)


def from_bits(bits: np.ndarray, dtype: Any) -> Any:
    """A torch tensor of ``dtype`` holding ``bits`` (the inverse of :func:`to_bits`).

    A C-contiguous array of the raw type is used as it is: the tensor shares its memory
    (except for a narrowed type, which is widened into a new tensor).
    """
    import torch

    etype = element_type(dtype)
    signed = np.int32 if etype.bits == 32 else np.int16
    torch_dtype = getattr(torch, etype.stored_as or etype.name)
    if (isinstance(bits, np.ndarray) and bits.ndim and bits.dtype == etype.raw
            and bits.flags.c_contiguous):
        # Shares the array's memory as it is (a same-width view keeps the shape).
        stored = torch.from_numpy(bits.view(signed)).view(torch_dtype)
    else:
        shape = np.shape(bits)
        array = np.ascontiguousarray(bits, dtype=etype.raw).reshape(-1).view(signed)
        # view(dtype) promotes a 0-d tensor to 1-d; reshape restores the shape it was given.
        stored = torch.from_numpy(array).view(torch_dtype).reshape(shape)
    return stored.to(getattr(torch, etype.name)) if etype.narrowed else stored
