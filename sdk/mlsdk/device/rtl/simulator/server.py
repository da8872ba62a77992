"""The cocotb server: a cocotb test, run inside the simulator, that serves device operations.

Started by a :class:`~mlsdk.device.rtl.cocotb_session.CocotbSession` (never by pytest) on
Icarus or Verilator. It connects to the session's Unix socket with the session's secret
(:func:`.connect.connect_to_runtime`), resets the top, then reads one JSON
operation per line and answers one JSON result per line, executing each with the shared
:class:`~mlsdk.device.rtl.driver.Driver`. Every answer and progress line echoes the request's
``seq`` (:mod:`mlsdk.device.rtl.protocol`). While it waits for a line the simulator is blocked,
so simulated time does not advance between commands. EOF or ``stop`` ends the test.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.cosim import top_inputs
from mncore_hdl.top.cosim_tb import RESET_EDGES

from mlsdk.device.rtl.dma import has_dma
from mlsdk.device.rtl.driver import Driver
from mlsdk.device.rtl.simulator.bus import CocotbBus
from mlsdk.device.rtl.simulator.connect import connect_to_runtime
from mlsdk.settings import SDK


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
        start = time.perf_counter()
        stream.write(json.dumps(obj).encode() + b"\n")
        stream.flush()
        stats["protocol_s"] += time.perf_counter() - start

    # where the server's time goes, for the runtime's ``profile`` operation (Driver.stats)
    stats = {"protocol_s": 0.0, "op_s": 0.0}
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
    bus = CocotbBus(dut, config, period_ns)
    driver = Driver(bus, config, progress, stats)
    # With the bulk back door, images may come and go as files in the run folder (the
    # runtime writes and reads them in its format; dma.py)
    files = {"files": {"binary": bool(bus.mem_binary)}} if has_dma(bus) else {}
    send({"ready": True, "seq": 0, **files})
    while True:
        line = stream.readline()
        if not line:
            break
        start = time.perf_counter()
        try:
            msg = json.loads(line)
            stats["protocol_s"] += time.perf_counter() - start
        except ValueError as exc:  # no seq to echo: the runtime treats it as out of step
            send({"error": f"malformed request line ({exc}): {line[:80]!r}", "seq": None})
            continue
        current[0] = msg.get("seq")
        if msg.get("op") == "stop":
            send({"stopped": True, "seq": current[0]})
            break
        start = time.perf_counter()
        try:
            result = await driver.execute(msg)
        except Exception as exc:  # the runtime turns it into a DeviceError
            result = {"error": f"{type(exc).__name__}: {exc}"}
        stats["op_s"] += time.perf_counter() - start
        send({**result, "seq": current[0]})
    stream.close()
    sock.close()
