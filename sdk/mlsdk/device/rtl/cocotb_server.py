"""cocotb side of ``mncore2:icarus``: a test that serves device operations over a socket.

Started by :class:`~mlsdk.device.rtl.icarus.IcarusSession` (never by pytest). It connects to
``127.0.0.1:$MNCORE_COSIM_PORT``, resets the top, then reads one JSON operation per line and
answers one JSON result per line, executing each with the shared
:class:`~mlsdk.device.rtl.driver.Driver`. While it waits for a line the simulator is blocked,
so simulated time does not advance between commands. EOF or ``stop`` ends the test.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts.cosim import backing_store, top_inputs

from mlsdk.device.rtl.driver import Driver


class CocotbBus:
    """:class:`~mlsdk.device.rtl.driver.Bus` over cocotb handles of the ``cosim_top`` ports."""

    def __init__(self, dut, config: ArchConfig, period_ns: float):
        self.dut = dut
        self.period_ns = period_ns
        self._handles: dict[str, object] = {}
        self._mems = [self._path(backing_store("cosim", g)) for g in range(config.groups)]

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
            return int(self._h(name).value)
        except ValueError:  # X or Z before the first assignment
            return 0

    async def edge(self, names: Sequence[str]) -> list[int]:
        await RisingEdge(self.dut.clk)  # values read now are the ones the edge sampled
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
            await RisingEdge(self.dut.clk)
            if self.get(name) == value:
                return True
        return False

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


@cocotb.test()
async def serve(dut):
    """Serve operations until the runtime says ``stop`` or goes away."""
    config = ArchConfig.from_dict(json.loads(os.environ["MNCORE_COSIM_CONFIG"]))
    period_ns = 2  # simulated time is only a clock here; cycles are what the runtime reads
    sock = socket.create_connection(("127.0.0.1", int(os.environ["MNCORE_COSIM_PORT"])),
                                    timeout=30)
    sock.settimeout(None)
    stream = sock.makefile("rwb")

    def send(obj) -> None:
        stream.write(json.dumps(obj).encode() + b"\n")
        stream.flush()

    last = [0.0]

    def progress(cycle: int, ops: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            send({"progress": [cycle, ops]})

    Clock(dut.clk, period_ns, unit="ns", impl="gpi").start()
    # Every input starts at 0, as in Amaranth's simulator (Icarus would leave them at z).
    dut.rst.value = 1
    for name in top_inputs(config):
        getattr(dut, name).value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    # The first operation starts one clock edge after reset, as on mncore2:rtl:
    # the refresh timers then have the same phase on both backends, and so do all cycles.
    await RisingEdge(dut.clk)
    driver = Driver(CocotbBus(dut, config, period_ns), config, progress)
    send({"ready": True})
    while True:
        line = stream.readline()
        if not line:
            break
        msg = json.loads(line)
        if msg.get("op") == "stop":
            send({"stopped": True})
            break
        try:
            result = await driver.execute(msg)
        except Exception as exc:  # the runtime turns it into a DeviceError
            result = {"error": f"{type(exc).__name__}: {exc}"}
        send(result)
    stream.close()
    sock.close()
