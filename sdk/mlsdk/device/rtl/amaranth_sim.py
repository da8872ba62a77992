"""``mncore2:rtl``: the co-simulation top in Amaranth's simulator, in a worker thread.

:class:`AmaranthDevice` is the device; :class:`AmaranthSession` the simulation it drives.

The simulator runs one async testbench that takes operations from a queue and executes them
with the shared :class:`~mlsdk.device.rtl.driver.Driver`. While the testbench waits for the
next operation it blocks the simulator thread, so simulated time does not advance between
commands; ``close()`` sends ``stop`` and the testbench returns, ending ``sim.run()``. Requests
and answers carry sequence numbers (:mod:`mlsdk.device.rtl.protocol`): a caller interrupted
by Ctrl-C leaves its operation running in the simulator thread, and the next request drains
that operation's answer instead of taking it for its own.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts.cosim import CYCLE, backing_store

from .device import RtlDevice
from .driver import Driver
from .images import Images, InlineImages
from .protocol import Exchange, ProtocolError

__all__ = ["AmaranthBus", "AmaranthSession", "AmaranthDevice"]

#: Memories with more rows than this are left out of the VCD (the DRAM backing stores would
#: add half a million variables; the converter's buffer and FIFOs stay in).
VCD_MEMORY_ROWS = 4096


class AmaranthBus:
    """:class:`~mlsdk.device.rtl.bus.Bus` over an Amaranth testbench context."""

    def __init__(self, ctx: Any, top: Any, config: ArchConfig, memories: list[Any]):
        from amaranth.hdl import Value

        self._value = Value.cast
        self.ctx = ctx
        self.top = top
        self._signals: dict[str, Any] = {}
        self._mems = memories

    def _sig(self, name: str) -> Any:
        sig = self._signals.get(name)
        if sig is None:
            obj = self.top
            for part in name.split("__"):
                obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
            sig = self._signals[name] = self._value(obj)
        return sig

    def set(self, name: str, value: int) -> None:
        self.ctx.set(self._sig(name), value)

    def get(self, name: str) -> int:
        return int(self.ctx.get(self._sig(name)))

    async def edge(self, names: Sequence[str]) -> list[int]:
        sampled = await self.ctx.tick().sample(*[self._sig(n) for n in names])
        return [int(v) for v in sampled[2:]]  # (clk, rst, *values)

    async def wait_until(self, name: str, value: int, max_cycles: int) -> bool:
        sig, cycle = self._sig(name), self._sig(CYCLE)
        deadline = self.ctx.get(cycle) + max_cycles
        await self.ctx.tick().until((sig == value) | (cycle >= deadline))
        return self.ctx.get(sig) == value or self.ctx.get(cycle) <= deadline

    def mem_read(self, group: int, address: int, count: int) -> np.ndarray:
        mem = self._mems[group]
        return np.array([self.ctx.get(mem[address + i]) for i in range(count)], dtype=np.uint64)

    def mem_write(self, group: int, address: int, words: np.ndarray) -> None:
        mem = self._mems[group]
        for i, w in enumerate(words):
            self.ctx.set(mem[address + i], int(w))


def backing_stores(design: Any, config: ArchConfig) -> list[Any]:
    """Each Group's backing store (``MemoryData``) in a simulator's elaborated design, found
    at its hierarchical path (``contracts.cosim.backing_store``), the one cocotb uses."""
    from amaranth.hdl._mem import MemoryInstance

    by_name = {info.name[1:]: fragment for fragment, info in design.fragments.items()
               if isinstance(fragment, MemoryInstance)}
    out = []
    for g in range(config.groups):
        path = tuple(backing_store("cosim", g).split("."))
        if path not in by_name:
            raise RuntimeError(f"The co-simulation top has no memory at {'.'.join(path)}")
        out.append(by_name[path]._data)
    return out


class _SmallMemories:
    """The simulator's design as the VCD writer sees it, minus the huge memories.

    Signal names starting with ``$`` (Amaranth's internal ``$signature__addr``) are left out
    too: VCD readers such as pyvcd reject them as references.
    """

    def __init__(self, design: Any):
        self._design = design

    def __getattr__(self, name: str) -> Any:
        return getattr(self._design, name)

    @property
    def fragments(self) -> dict[Any, Any]:
        import copy

        from amaranth.hdl._ast import SignalDict
        from amaranth.hdl._mem import MemoryInstance

        out = {}
        for fragment, info in self._design.fragments.items():
            if isinstance(fragment, MemoryInstance) and fragment._data.depth > VCD_MEMORY_ROWS:
                continue
            info = copy.copy(info)
            info.signal_names = SignalDict((sig, name) for sig, name in info.signal_names.items()
                                           if not name.startswith("$"))
            out[fragment] = info
        return out


class AmaranthSession:
    """A persistent Amaranth simulation of :class:`~mncore_hdl.top.cosim_top.CosimTop`.

    Parameters
    ----------
    config : ArchConfig
        The chip (its DRAM is the simulated window).
    vcd : path, optional
        Write a VCD of the whole session there.
    progress : callable, optional
        ``progress(cycle, operations_done)``, called from the simulator thread.
    """

    kind = "rtl"

    def __init__(self, config: ArchConfig, vcd: Path | None = None,
                 progress: Callable[[int, int], None] | None = None):
        self.config = config
        self.vcd = vcd
        self.progress = progress
        # SimpleQueue: a put is one C call, so an interrupt cannot leave it half done.
        self._requests: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._responses: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.exchange = Exchange("Amaranth")
        self.images: Images = InlineImages()
        self.dead: str | None = None
        self._thread = threading.Thread(target=self._run, name="mncore2-rtl-sim", daemon=True)
        self._thread.start()
        ready = self._responses.get()
        if "error" in ready:
            self.dead = ready["error"]

    def _run(self) -> None:
        try:
            from amaranth.sim import Simulator
            from mncore_hdl.top.cosim_top import CosimTop

            top = CosimTop(self.config)
            sim = Simulator(top)
            sim.add_clock(1e-6 / self.config.clock_mhz)
            sim.add_testbench(self._bench(top, backing_stores(sim._engine._design, self.config)))
            if self.vcd is None:
                sim.run()
                return
            engine = sim._engine
            design, engine._design = engine._design, _SmallMemories(engine._design)
            writer = sim.write_vcd(str(self.vcd))
            try:
                writer.__enter__()
            finally:
                engine._design = design
            try:
                sim.run()
            finally:
                writer.__exit__(None, None, None)
        except BaseException as exc:  # report to the caller instead of dying silently
            self._responses.put({"error": f"the Amaranth simulation failed: "
                                          f"{type(exc).__name__}: {exc}", "fatal": True})

    def _bench(self, top: Any, memories: list[Any]) -> Callable[[Any], Any]:
        async def bench(ctx: Any) -> None:
            # The design starts in its reset state; one edge brings it to where the Icarus
            # server starts its first operation (one edge after releasing reset), so both
            # backends see the same refresh phase and measure the same cycles.
            await ctx.tick()
            bus = AmaranthBus(ctx, top, self.config, memories)
            driver = Driver(bus, self.config, self.progress)
            self._responses.put({"ready": True})
            while True:
                msg = self._requests.get()
                if msg.get("op") == "stop":
                    return
                try:
                    result = await driver.execute(msg)
                except Exception as exc:
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                self._responses.put({**result, "seq": msg.get("seq")})
        return bench

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Execute one operation; ``{"error": ...}`` when it fails or takes over ``timeout`` s.

        A KeyboardInterrupt reaches only the calling (main) thread, never the simulator
        thread, so an interrupted operation still runs to its end there; its answer is
        drained and dropped before this request's (see :mod:`mlsdk.device.rtl.protocol`).
        """
        if self.dead:
            return {"error": self.dead, "fatal": True}
        wire, seq, deadline = self.exchange.open(msg, timeout)
        self._requests.put(wire)
        try:
            while True:
                try:
                    result = self._responses.get(
                        timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    self.dead = (f"the Amaranth simulation did not answer {msg.get('op')!r} "
                                 f"within {timeout:.0f} s")
                    break
                if result.get("fatal"):
                    self.dead = result["error"]
                    break
                if self.exchange.accept(result, seq):
                    return result
        except ProtocolError as exc:
            self.dead = str(exc)
        self.exchange.done(seq)
        return {"error": self.dead, "fatal": True}

    def lose(self, reason: str) -> str:
        """Refuse every later request with ``reason``."""
        self.dead = reason
        return reason

    def close(self, timeout: float = 60.0) -> None:
        """Stop the testbench and wait for the simulator thread (the VCD is then complete).

        Operations still queued (interrupted ones) run to their end first; a session lost
        to a protocol error is stopped too.
        """
        if self._thread.is_alive():
            self._requests.put({"op": "stop"})
        self._thread.join(timeout)


class AmaranthDevice(RtlDevice):
    """``mncore2:rtl``: the memory system's RTL in Amaranth's simulator, in-process.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`.
    """

    simulator = "rtl"

    def _open_session(self) -> AmaranthSession:
        self._say("starting the Amaranth simulation of the memory system")
        session = AmaranthSession(self.config, self.vcd_path, self._progress)
        if session.dead:
            raise RuntimeError(session.dead)
        return session
