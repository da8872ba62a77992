"""The driver's bus on cocotb handles: what the cocotb server drives the testbench top with.

Runs inside the simulator (Icarus or Verilator), under the cocotb server (:mod:`.server`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import Edge, RisingEdge, with_timeout
from cocotb.utils import get_sim_time
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.cosim import CYCLE, TB_DUT_INSTANCE, backing_store
from mncore_hdl.top.cosim_tb import MEMFILE_DEFAULT, TB_MODULE

from mlsdk.settings import SDK

__all__ = ["CocotbBus"]


class CocotbBus:
    """:class:`~mlsdk.device.rtl.bus.Bus` over cocotb handles of the ``cosim_top`` ports.

    On the testbench top ``cosim_tb`` it is also a :class:`~mlsdk.device.rtl.dma.BulkBus`: the
    back door goes through ``memfile`` (``$MNCORE_COSIM_DMA=0`` turns that and the DMA
    engines off, so the driver falls back to the beat-by-beat path, e.g. to compare the two).

    :attr:`stats` sums where the server's time went: ``sim_s`` and ``sim_cpu_s``, the wall and
    process seconds spent awaiting the simulator (the model, or Icarus, running; the
    difference is the machine's other load), and ``waits``, how many times it was awaited.
    """

    def __init__(self, dut, config: ArchConfig, period_ns: float):
        self.dut = dut
        self.period_ns = period_ns
        self.config = config
        self._handles: dict[str, object] = {}
        self._mem_handles: list | None = None
        self._settled = False  # woken by the back door, not by a clock edge
        self.stats = {"sim_s": 0.0, "sim_cpu_s": 0.0, "waits": 0}
        bulk = SDK["MNCORE_COSIM_DMA"].get() and self.has(tb.MEM_GO)
        # cosim_tb's default back-door file, relative to the simulator's working folder
        self.memfile = Path.cwd() / MEMFILE_DEFAULT if bulk else None
        self.mem_binary = bulk and self.get(tb.MEM_BINARY) == 1

    def has(self, name: str) -> bool:
        try:
            self._h(name)
        except AttributeError:
            return False
        return True

    @property
    def _mems(self) -> list:
        if self._mem_handles is None:  # the stores sit in the design, below cosim_tb
            top = TB_MODULE if self.has(TB_DUT_INSTANCE) else "cosim"
            self._mem_handles = [self._path(backing_store(top, g))
                                 for g in range(self.config.groups)]
        return self._mem_handles

    def _path(self, dotted: str):
        handle = self.dut
        for part in dotted.split("."):
            handle = getattr(handle, part)
        return handle

    def _h(self, name: str):
        h = self._handles.get(name)
        if h is None:
            h = self._handles[name] = getattr(self.dut, name)
        return h

    def set(self, name: str, value: int) -> None:
        self._h(name).value = value

    def get(self, name: str) -> int:
        try:
            value = int(self._h(name).value)
        except ValueError:  # X or Z before the first assignment
            return 0
        if name == CYCLE and self._settled:
            # After a back-door wake the last edge's updates are visible; the driver measures
            # with the value that edge sampled, which for the free-running counter is one less.
            value -= 1
        return value

    def now(self) -> int:
        """Simulation time in simulator steps: the wave file's time unit."""
        return int(get_sim_time("step"))

    async def _await(self, trigger) -> None:
        """Await ``trigger``, counting the time in :attr:`stats`."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            await trigger
        finally:
            stats = self.stats
            stats["sim_s"] += time.perf_counter() - wall
            stats["sim_cpu_s"] += time.process_time() - cpu
            stats["waits"] += 1

    async def edge(self, names: Sequence[str]) -> list[int]:
        await self._await(RisingEdge(self._h(tb.CLOCK)))  # values read now: the edge's
        self._settled = False
        return [self.get(n) for n in names]

    async def wait_until(self, name: str, value: int, max_cycles: int) -> bool:
        handle = self._h(name)
        if len(handle) == 1 and value == 1:
            if self.get(name) == 1:
                return True
            try:
                await self._await(with_timeout(RisingEdge(handle), max_cycles * self.period_ns,
                                               "ns"))
            except cocotb.triggers.SimTimeoutError:
                return False
            return True
        for _ in range(max_cycles):
            await self._await(RisingEdge(self._h(tb.CLOCK)))
            self._settled = False
            if self.get(name) == value:
                return True
        return False

    async def wait_change(self, name: str) -> None:
        """Wait for ``name`` to change (the back door's acknowledge; no clock edge passes)."""
        await self._await(Edge(self._h(name)))
        self._settled = True

    def mem_read(self, group: int, address: int, count: int) -> np.ndarray:
        mem = self._mems[group]
        out = np.zeros(count, dtype=np.uint64)
        for i in range(count):
            try:
                out[i] = int(mem[address + i].value)
            except ValueError:
                out[i] = 0
        return out

    def mem_write(self, group: int, address: int, words: np.ndarray) -> None:
        mem = self._mems[group]
        for i, w in enumerate(words):
            mem[address + i].value = int(w)
