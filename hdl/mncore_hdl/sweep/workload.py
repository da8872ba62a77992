"""What one sweep point runs: the traffic of a memory-controller bench or one layout conversion."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["Workload", "KINDS", "PATTERNS", "PAIRS", "WORKLOAD_FIELDS"]

#: Workload kinds: memory-controller traffic, or a layout conversion on the converter.
KINDS = ("memctrl", "convert")
#: Traffic patterns of a ``memctrl`` workload (the hardware traffic generator's modes).
PATTERNS = ("read", "write", "mixed", "random")
#: Layout pairs of a ``convert`` workload (source -> destination, as in bench_converter.py).
PAIRS = ("host->native", "native->host", "transpose", "group redistribution")


@dataclass(frozen=True)
class Workload:
    """The workload of one point; every field is a sweep parameter by its name.

    Parameters
    ----------
    kind : str
        ``"memctrl"`` (traffic on the memory controller's ports) or ``"convert"`` (a layout
        conversion on the converter).
    pattern : str
        ``memctrl``: ``"read"``, ``"write"``, ``"mixed"`` (read and write bursts alternating,
        a copy) or ``"random"`` (bursts at random aligned addresses, random direction).
    ports : int
        ``memctrl``: requester ports driving traffic at once.
    lw : int
        ``memctrl``: LWs each port moves.
    burst_lw : int
        ``memctrl``: beats per request; 0 means one DRAM row for sequential patterns and one
        DRAM burst (``burst_length``) for ``random``.
    read_share : float
        ``memctrl`` ``mixed``: the share of the LWs that are reads.
    pair : str
        ``convert``: one of :data:`PAIRS`.
    shape : tuple of int
        ``convert``: the tensor's (rows, columns).
    dtype : str
        ``convert``: element type.
    buffer_lw : int
        ``convert``: the converter's on-chip double buffer, in LW (a design parameter).
    """

    kind: str = "memctrl"
    pattern: str = "read"
    ports: int = 1
    lw: int = 4096
    burst_lw: int = 0
    read_share: float = 0.5
    pair: str = "host->native"
    shape: tuple[int, int] = (64, 64)
    dtype: str = "float32"
    buffer_lw: int = 16384  # the RTL converter's (converter.program.DEFAULT_BUFFER_LW)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Workload kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.pattern not in PATTERNS:
            raise ValueError(f"Workload pattern must be one of {', '.join(PATTERNS)}, "
                             f"not {self.pattern!r}")
        if self.pair not in PAIRS:
            raise ValueError(f"Workload pair must be one of {', '.join(PAIRS)}, "
                             f"not {self.pair!r}")
        for name in ("ports", "lw", "buffer_lw"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Workload {name} must be a positive integer, not {value!r}")
        if isinstance(self.burst_lw, bool) or not isinstance(self.burst_lw, int) \
                or self.burst_lw < 0:
            raise ValueError(f"Workload burst_lw must be a non-negative integer (0: default), "
                             f"not {self.burst_lw!r}")
        if not 0.0 <= float(self.read_share) <= 1.0:
            raise ValueError(f"Workload read_share must be within [0, 1], not {self.read_share!r}")
        shape = tuple(self.shape)
        if len(shape) != 2 or not all(isinstance(n, int) and n > 0 for n in shape):
            raise ValueError(f"Workload shape must be two positive integers, not {self.shape!r}")
        object.__setattr__(self, "shape", shape)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields that matter for this kind (the point's identity)."""
        data = dataclasses.asdict(self)
        data["shape"] = list(self.shape)
        own = _KIND_FIELDS[self.kind]
        return {k: v for k, v in data.items() if k == "kind" or k in own}


#: Names of every workload field, in declaration order.
WORKLOAD_FIELDS = tuple(f.name for f in dataclasses.fields(Workload))
_KIND_FIELDS = {
    "memctrl": ("pattern", "ports", "lw", "burst_lw", "read_share"),
    "convert": ("pair", "shape", "dtype", "buffer_lw"),
}
