"""The pipeline's cost model: modeled cycles of a Launch and of a hand-off, with no device.

Every figure is what the functional model (``mncore2:auto``) charges, from the very functions
it charges with: a Launch streams each input and constant in through the compute port
(:func:`mncore_hdl.memctrl.timing.stream_cycles`, reads), computes
(:func:`mlsdk.device.base.compute_cycles`) and streams each output out (writes); a hand-off
is one Bind (:data:`mlsdk.device.base.BIND_CYCLES`) when the specs are memcopyable, else a
Convert (:func:`mncore_hdl.converter.timing.conversion_cycles`, moving
:func:`mlsdk.device.base.converter_bytes`). So the model equals what ``context.report()``
measures on ``mncore2:auto``, to the cycle (``tests/sdk/test_costs.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mncore_hdl.arch import ArchConfig
from mncore_hdl.converter.timing import conversion_cycles
from mncore_hdl.layout import Layout, conversion
from mncore_hdl.memctrl.timing import stream_cycles

from .device.base import BIND_CYCLES, compute_cycles, converter_bytes

__all__ = ["HandoffCost", "memcopyable", "launch_cycles", "buffer_cycles", "handoff_cost",
           "conversion_cost"]


@dataclass(frozen=True)
class HandoffCost:
    """What handing a buffer over to an input costs.

    Attributes
    ----------
    cycles : int
        Modeled cycles of the Bind or Convert.
    converter_bytes : int
        Bytes the layout converter moves (0 for a relocation).
    relocation : bool
        True for a Bind (the layouts are memcopyable), False for a Convert.
    """

    cycles: int
    converter_bytes: int
    relocation: bool

    def to_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "converter_bytes": self.converter_bytes,
                "relocation": self.relocation}


def memcopyable(src: Layout, dst: Layout) -> bool:
    """True when a buffer in ``src`` can be read as ``dst`` with no data movement (the
    layout half of :meth:`mlsdk.iospec.IOSpec.is_memcopyable_to`)."""
    return (src.shape == dst.shape and src.dtype == dst.dtype
            and src.groups == dst.groups and src.lw_per_group == dst.lw_per_group
            and src.equivalent(dst))


def buffer_cycles(config: ArchConfig, layout: Layout, *, write: bool) -> int:
    """Cycles a Launch spends streaming one buffer in ``layout`` in (``write=False``) or out
    through the compute port: the Groups work in parallel, so one Group's share."""
    return stream_cycles(config, layout.lw_per_group, write=write)


def launch_cycles(config: ArchConfig, program: Any,
                  layouts: Mapping[str, Layout] | None = None,
                  output_layouts: Mapping[str, Layout] | None = None) -> int:
    """Modeled cycles of one Launch of ``program`` with its IOs in the given layouts.

    Parameters
    ----------
    config : ArchConfig
        The chip.
    program : DeviceProgram
        The compiled program (its inputs, constants, outputs and FLOPs).
    layouts, output_layouts : dict of str to Layout, optional
        Layouts that replace the program's own for some inputs (or constants) and outputs:
        what the Launch would cost had they been compiled so.
    """
    ins = {**program.layouts, **(layouts or {})}
    outs = {**program.output_layouts, **(output_layouts or {})}
    cycles = sum(buffer_cycles(config, ins[n], write=False)
                 for n in (*program.inputs, *program.constants))
    cycles += compute_cycles(config, program.flops)
    return cycles + sum(buffer_cycles(config, outs[n], write=True)
                        for n in program.launch_outputs)


def handoff_cost(config: ArchConfig, src: Layout, dst: Layout, *, src_group: int = 0,
                 dst_group: int = 0) -> HandoffCost:
    """What passing a buffer in ``src`` to an input in ``dst`` costs: a Bind when the layouts
    are memcopyable, else a Convert (see :func:`conversion_cost`)."""
    if memcopyable(src, dst):
        return HandoffCost(BIND_CYCLES, 0, True)
    return conversion_cost(config, src, dst, src_group=src_group, dst_group=dst_group)


def conversion_cost(config: ArchConfig, src: Layout, dst: Layout, *, src_group: int = 0,
                    dst_group: int = 0) -> HandoffCost:
    """The modeled cycles and converter bytes of a Convert from ``src`` into ``dst``.

    ``src_group`` and ``dst_group`` are the first Groups of the two buffers (a buffer over
    every Group starts at 0; a one-Group buffer goes where the allocator puts it): where both
    touch one Group, its data bus carries reads and writes alike.

    Raises
    ------
    LayoutError
        When the converter cannot convert between the two layouts.
    """
    return _conversion_cost(config, src, dst, src_group, dst_group)


@lru_cache(maxsize=512)
def _conversion_cost(config: ArchConfig, src: Layout, dst: Layout, src_group: int,
                     dst_group: int) -> HandoffCost:
    descriptor = conversion(src, dst)
    cycles = conversion_cycles(config, descriptor, src_group=src_group, dst_group=dst_group)
    return HandoffCost(cycles, converter_bytes(config, descriptor), False)
