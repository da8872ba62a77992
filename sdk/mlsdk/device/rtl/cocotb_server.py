"""cocotb side of ``mncore2:icarus``: a test that serves device operations over a socket.

Started by :class:`~mlsdk.device.rtl.icarus.IcarusSession` (never by pytest). It connects to
the session's Unix socket with the session's secret
(:func:`~mlsdk.device.rtl.endpoint.connect_to_runtime`), resets the top, then reads one JSON
operation per line and answers one JSON result per line, executing each with the shared
:class:`~mlsdk.device.rtl.driver.Driver`. Every answer and progress line echoes the request's
``seq`` (:mod:`mlsdk.device.rtl.protocol`). While it waits for a line the simulator is blocked,
so simulated time does not advance between commands. EOF or ``stop`` ends the test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Edge, RisingEdge, with_timeout
from cocotb.utils import get_sim_time
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.cosim import CYCLE, TB_DUT_INSTANCE, backing_store, top_inputs
from mncore_hdl.top.cosim_tb import MEMFILE_DEFAULT, RESET_EDGES, TB_MODULE

from mlsdk.device.rtl.driver import Driver
from mlsdk.device.rtl.endpoint import connect_to_runtime
from mlsdk.settings import SDK


class CocotbBus:
    """:class:`~mlsdk.device.rtl.driver.Bus` over cocotb handles of the ``cosim_top`` ports.

    On the testbench top ``cosim_tb`` it is also a :class:`~mlsdk.device.rtl.dma.BulkBus`: the
    back door goes through ``memfile`` (``$MNCORE_COSIM_DMA=0`` turns that and the DMA
    engines off, so the driver falls back to the beat-by-beat path, e.g. to compare the two).
    """

    def __init__(self, dut, config: ArchConfig, period_ns: float):
        self.dut = dut
        self.period_ns = period_ns
        self.config = config
        self._handles: dict[str, object] = {}
        self._mem_handles: list | None = None
        self._settled = False  # woken by the back door, not by a clock edge
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

    async def edge(self, names: Sequence[str]) -> list[int]:
        await RisingEdge(self._h(tb.CLOCK))  # values read now are the ones the edge sampled
        self._settled = False
        return [self.get(n) for n in names]

    async def wait_until(self, name: str, value: int, max_cycles: int) -> bool:
        handle = self._h(name)
        if len(handle) == 1 and value == 1:
            if self.get(name) == 1:
                return True
            try:
                await with_timeout(RisingEdge(handle), max_cycles * self.period_ns, "ns")
            except cocotb.triggers.SimTimeoutError:
                return False
            return True
        for _ in range(max_cycles):
            await RisingEdge(self._h(tb.CLOCK))
            self._settled = False
            if self.get(name) == value:
                return True
        return False

    async def wait_change(self, name: str) -> None:
        """Wait for ``name`` to change (the back door's acknowledge; no clock edge passes)."""
        await Edge(self._h(name))
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


async def _reset(dut, config: ArchConfig) -> None:
    """Reset the top; return right after the first clock edge that samples reset low.

    The first operation then starts one clock edge after reset, as on mncore2:rtl, so the
    refresh timers have the same phase on every backend, and so do all cycles.
    """
    clock, reset = getattr(dut, tb.CLOCK), getattr(dut, tb.RESET)
    if hasattr(dut, tb.DMA_GO):
        # cosim_tb holds reset itself for its first edges (a VPI-written reset would slow
        # Verilator's model); its inputs start at 0. Values read after an edge are the ones the
        # edge sampled, so the loop ends at the first edge that sampled reset low.
        while True:
            await RisingEdge(clock)
            if str(reset.value) == "0":
                return
    # Every input starts at 0, as in Amaranth's simulator (Icarus would leave them at z).
    reset.value = 1
    for name in top_inputs(config):
        getattr(dut, name).value = 0
    await ClockCycles(clock, RESET_EDGES)
    reset.value = 0
    await RisingEdge(clock)


@cocotb.test()
async def serve(dut):
    """Serve operations until the runtime says ``stop`` or goes away."""
    config = ArchConfig.from_dict(json.loads(SDK["MNCORE_COSIM_CONFIG"].raw() or "null"))
    period_ns = 2  # simulated time is only a clock here; cycles are what the runtime reads
    sock = connect_to_runtime()
    stream = sock.makefile("rwb")

    def send(obj) -> None:
        stream.write(json.dumps(obj).encode() + b"\n")
        stream.flush()

    last = [0.0]
    current: list[int | None] = [None]  # the seq of the request being executed

    def progress(cycle: int, ops: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            send({"progress": [cycle, ops], "seq": current[0]})

    if SDK["MNCORE_COSIM_CLOCK"].get() != "simulator":  # Verilator's loop has its own
        Clock(dut.clk, period_ns, unit="ns", impl="gpi").start()
    await _reset(dut, config)
    driver = Driver(CocotbBus(dut, config, period_ns), config, progress)
    send({"ready": True, "seq": 0})
    while True:
        line = stream.readline()
        if not line:
            break
        try:
            msg = json.loads(line)
        except ValueError as exc:  # no seq to echo: the runtime treats it as out of step
            send({"error": f"malformed request line ({exc}): {line[:80]!r}", "seq": None})
            continue
        current[0] = msg.get("seq")
        if msg.get("op") == "stop":
            send({"stopped": True, "seq": current[0]})
            break
        try:
            result = await driver.execute(msg)
        except Exception as exc:  # the runtime turns it into a DeviceError
            result = {"error": f"{type(exc).__name__}: {exc}"}
        send({**result, "seq": current[0]})
    stream.close()
    sock.close()
