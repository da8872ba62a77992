"""IOSpec: the compatibility metadata of one input or output of a compiled function."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from mncore_hdl.layout import Layout, dtype_name

__all__ = ["IOSpec"]


@dataclass(frozen=True, eq=False)
class IOSpec:
    """Name, shape, dtype, layout, byte size and location of a function IO.

    An IOSpec carries no address: used as an ``io_spec_constraints`` value it copies the
    layout and type a buffer must have, never a buffer.

    Attributes
    ----------
    name : str
        The IO's name in the function's input or output dict.
    shape : tuple of int
    dtype : torch.dtype
    layout : Layout
        Where each element lives in DRAM (MN-Core sub-axis notation).
    location : str
        Always ``"DRAM"`` on this model.
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    layout: Layout
    location: str = "DRAM"

    def __post_init__(self) -> None:
        """Reject a spec that contradicts itself: its layout must hold exactly its type."""
        if not isinstance(self.dtype, torch.dtype):
            raise TypeError(f"IOSpec {self.name!r}: dtype must be a torch.dtype, not "
                            f"{self.dtype!r}")
        if not isinstance(self.layout, Layout):
            raise TypeError(f"IOSpec {self.name!r}: layout must be a Layout, not "
                            f"{type(self.layout).__name__}")
        object.__setattr__(self, "shape", _shape(self.name, self.shape))
        if self.layout.dtype != self.dtype_name:
            raise ValueError(
                f"IOSpec {self.name!r}: dtype {self.dtype_name} disagrees with its layout's "
                f"element type {self.layout.dtype} (layout {self.layout}); give a layout of "
                f"dtype {self.dtype_name}"
            )
        if self.shape != tuple(self.layout.shape):
            raise ValueError(
                f"IOSpec {self.name!r}: shape {self.shape} disagrees with its layout's shape "
                f"{tuple(self.layout.shape)} (layout {self.layout})"
            )
        if self.location != "DRAM":
            raise ValueError(f"IOSpec {self.name!r}: location must be 'DRAM', not "
                             f"{self.location!r}")

    @property
    def nbytes(self) -> int:
        """Bytes of DRAM a buffer in this spec occupies (padding included)."""
        return self.layout.nbytes

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    def is_memcopyable_to(self, other: IOSpec) -> bool:
        """True when a buffer written in this spec can be read as ``other`` with no data movement.

        That is: same shape, same dtype, same location, layouts that place every element
        at the same Group, LW address and lane (after normalisation), and the same footprint
        (Groups and LWs per Group, padding included: the reader reads its whole footprint
        from the writer's buffer). Names do not matter.
        """
        if not isinstance(other, IOSpec):
            raise TypeError(f"is_memcopyable_to() takes an IOSpec, not {type(other).__name__}")
        return (self.shape == other.shape and self.dtype == other.dtype
                and self.location == other.location
                and self.layout.groups == other.layout.groups
                and self.layout.lw_per_group == other.layout.lw_per_group
                and self.layout.equivalent(other.layout))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IOSpec):
            return NotImplemented
        return self.name == other.name and self.is_memcopyable_to(other)

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.dtype, self.layout.normalized))

    def __str__(self) -> str:
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        return (f"IOSpec({self.name!r}: {shape} {self.dtype_name} in {self.location}, "
                f"layout {self.layout}, {self.nbytes} bytes)")

    def __repr__(self) -> str:
        return (f"IOSpec(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, "
                f"layout={str(self.layout)!r}, nbytes={self.nbytes}, "
                f"location={self.location!r})")

    def describe_difference(self, other: IOSpec) -> str:
        """Which of shape, dtype, layout and location differ, in words."""
        parts = []
        if self.shape != other.shape:
            parts.append(f"shape {self.shape} vs {other.shape}")
        if self.dtype != other.dtype:
            parts.append(f"dtype {self.dtype_name} vs {other.dtype_name}")
        if not self.layout.equivalent(other.layout):
            parts.append(f"layout {self.layout} vs {other.layout}")
        elif (self.layout.groups, self.layout.lw_per_group) != (other.layout.groups,
                                                               other.layout.lw_per_group):
            parts.append(f"footprint {self.layout.groups}x{self.layout.lw_per_group} LW vs "
                         f"{other.layout.groups}x{other.layout.lw_per_group} LW")
        if self.location != other.location:
            parts.append(f"location {self.location} vs {other.location}")
        return ", ".join(parts) or "nothing"

    # -- serialization ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able values (name, shape, dtype, layout, nbytes, location)."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype_name,
                "layout": str(self.layout), "nbytes": self.nbytes, "location": self.location}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IOSpec:
        """Inverse of :meth:`to_dict`; ValueError or TypeError naming what is missing or
        wrong."""
        if not isinstance(data, dict):
            raise TypeError(f"IOSpec.from_dict takes a dict, not {type(data).__name__}")
        missing = [key for key in ("name", "shape", "dtype", "layout") if key not in data]
        if missing:
            raise ValueError(f"IOSpec dict lacks {missing}; it has {sorted(map(str, data))}")
        dtype = getattr(torch, data["dtype"], None) if isinstance(data["dtype"], str) else None
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"IOSpec dict 'dtype' must name a torch dtype (e.g. 'float32'), "
                             f"not {data['dtype']!r}")
        if not isinstance(data["layout"], str):
            raise TypeError(f"IOSpec dict 'layout' must be a layout string, not "
                            f"{data['layout']!r}")
        layout = Layout.parse(data["layout"], data["dtype"])
        return cls(data["name"], data["shape"], dtype, layout, data.get("location", "DRAM"))


def _shape(name: str, shape: object) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; TypeError for a string, floats or bools."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"IOSpec {name!r}: shape must be a tuple of ints, not {shape!r}")
    dims = tuple(shape)
    if not all(isinstance(d, int) or hasattr(d, "__index__") for d in dims) or any(
            isinstance(d, bool) for d in dims):
        raise TypeError(f"IOSpec {name!r}: shape must be a tuple of ints, not {shape!r}")
    return tuple(operator.index(d) for d in dims)
