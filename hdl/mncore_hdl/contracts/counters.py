"""The width of every performance counter: the controllers', the converter's, the testbench's."""

from __future__ import annotations

__all__ = ["COUNTER_BITS"]

#: Bits of every event and cycle counter that software reads as one register: the memory
#: controllers' CSRs and per-port counters, the layout converter's counters, and the
#: testbench's DMA cycle count (``dma_cycles``). The co-simulation top's free-running ``cycle``
#: is wider (``contracts.cosim.CYCLE_BITS``): it is a clock, never cleared.
COUNTER_BITS = 32
