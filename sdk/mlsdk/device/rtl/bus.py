"""The driver's view of a simulator: five calls on the co-simulation top's ports.

:class:`~mlsdk.device.rtl.driver.Driver` is written against :class:`Bus` alone; the Amaranth
testbench context (``amaranth_sim.AmaranthBus``) and cocotb handles
(``simulator.bus.CocotbBus``) implement it, so every backend runs the same driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["Bus"]


class Bus(Protocol):
    """What the driver needs from a simulator; port names are the Verilog ones
    (``host__0__req__valid``, ``reg_we``, ``cycle``)."""

    def set(self, name: str, value: int) -> None:
        """Drive input ``name`` from the next clock edge on."""

    def get(self, name: str) -> int:
        """The current value of ``name`` (read right after an edge)."""

    async def edge(self, names: Sequence[str]) -> list[int]:
        """Wait for the next rising edge; return ``names`` as sampled at that edge."""

    async def wait_until(self, name: str, value: int, max_cycles: int) -> bool:
        """Wait for an edge at which ``name == value``; False after ``max_cycles`` edges."""

    def mem_read(self, group: int, address: int, count: int) -> np.ndarray:
        """Back door: ``count`` LWs of Group ``group``'s backing store (no clock)."""

    def mem_write(self, group: int, address: int, words: np.ndarray) -> None:
        """Back door: store ``words`` into Group ``group``'s backing store (no clock)."""
