"""The command driver both RTL backends share: device operations on the co-simulation top.

The driver is written against a tiny :class:`Bus` (set a port, read a port, wait for the next
clock edge, wait for a condition, back-door memory). Amaranth's testbench context
(``mncore2:rtl``) and cocotb handles (``mncore2:icarus``) each implement it in a few lines, so
the two backends execute every operation with the same code and cannot drift apart.

Operations are JSON-ready dicts (``{"op": "write", ...}``) and so are their results; they are
what :class:`~mlsdk.device.rtl.device.RtlDevice`'s hooks send (see ``docs/cosim.md``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.contracts.converter import (
    BUSY,
    COUNTERS,
    CTRL_CLEAR,
    CTRL_START,
    DONE,
    ERROR,
    ERROR_CODE,
    REG_ADDR,
    REG_WDATA,
    REG_WE,
    Reg,
)
from mncore_hdl.contracts.cosim import (
    CYCLE,
    DESC_INDEX,
    DESC_RDATA,
    DESC_WDATA,
    DESC_WE,
    MC_IDLE,
    TOP_PATHS,
    csr_addr_port,
    csr_rdata_port,
    requester_prefix,
)
from mncore_hdl.contracts.memctrl import (
    PORTS,
    REPORTED_COUNTERS,
    RequestFormat,
    csr_address,
    max_burst,
    pack_wdata,
    unpack_rdata,
)
from mncore_hdl.contracts.testbench import (
    DMA_CYCLES,
    DMA_ERROR,
    MARK_BUFFER,
    MARK_CALL,
    MARK_KIND,
    MARK_SEQ,
    WAVES_OFF,
)
from mncore_hdl.descriptors import Descriptor, decode, encode

from .dma import dma_transfer, dump_words, has_dma, load_words

__all__ = ["Bus", "Driver", "DriverError", "PORTS", "pack_words", "unpack_words"]

#: Slices of at most this many cycles between progress reports while waiting in hardware.
PROGRESS_CHUNK = 20_000


class DriverError(Exception):
    """An operation the hardware refused or did not finish (the message says which and why)."""


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


def pack_words(words: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(words, dtype="<u8").tobytes()).decode("ascii")


def unpack_words(text: str, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(text), dtype="<u8").astype(np.uint64)
    return raw.reshape(shape)


class _Lane:
    """One Group's share of a burst transfer: its request list and its beat position."""

    def __init__(self, prefix: str, bursts: list[tuple[int, int]], words: np.ndarray):
        self.prefix = prefix
        self.bursts = bursts
        self.words = words
        self.req = 0
        self.beat = 0
        self.error = False
        self.driven: dict[str, int] = {}

    def set(self, bus: Bus, field: str, value: int) -> None:
        if self.driven.get(field) != value:
            bus.set(self.prefix + field, value)
            self.driven[field] = value


class Driver:
    """Executes device operations on the co-simulation top through a :class:`Bus`.

    Parameters
    ----------
    bus : Bus
        The simulator binding.
    config : ArchConfig
        The chip the top was built for.
    progress : callable, optional
        Called as ``progress(cycle, operations_done)`` during long waits and after each op.
    """

    def __init__(self, bus: Bus, config: ArchConfig,
                 progress: Callable[[int, int], None] | None = None):
        self.bus = bus
        self.config = config
        self.progress = progress
        self.done_ops = 0
        self._request = RequestFormat.of(config)
        self._max_burst = max_burst(config)
        self._timeout_per_lw = 8 * (config.timing.trp + config.timing.trcd + config.timing.cl)

    # -- entry point -------------------------------------------------------------------------

    async def execute(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Run one operation; return its result (``{"error": reason}`` if it failed)."""
        op = msg.get("op")
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            return {"error": f"unknown operation {op!r}"}
        try:
            result = await handler(msg)
        except DriverError as exc:
            result = {"error": str(exc)}
        self.done_ops += 1
        self._report()
        return result

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.bus.get(CYCLE), self.done_ops)

    async def _wait(self, name: str, value: int, max_cycles: int, what: str) -> None:
        waited = 0
        while waited < max_cycles:
            chunk = min(PROGRESS_CHUNK, max_cycles - waited)
            if await self.bus.wait_until(name, value, chunk):
                return
            waited += chunk
            self._report()
        raise DriverError(f"{what}: {name} did not become {value:#x} within {max_cycles} cycles")

    async def _drain(self) -> None:
        await self.bus.edge(())
        full = (1 << self.config.groups) - 1
        await self._wait(MC_IDLE, full, 10_000, "draining the memory controllers")

    # -- burst transfers through the host / compute ports ------------------------------------

    def _lanes(self, path: str, buf: dict[str, int], image: np.ndarray | None) -> list[_Lane]:
        if path not in TOP_PATHS:
            raise DriverError(f"port path must be 'host' or 'compute', not {path!r}")
        lanes = []
        row = self._max_burst
        for i in range(buf["groups"]):
            bursts = []
            address, end = buf["address"], buf["address"] + buf["lw_per_group"]
            while address < end:
                n = min(row - address % row, end - address)  # max burst: one DRAM row
                bursts.append((address, n))
                address += n
            words = (image[i] if image is not None
                     else np.zeros(buf["lw_per_group"], dtype=np.uint64))
            lanes.append(_Lane(requester_prefix(path, buf["group"] + i), bursts, words))
        return lanes

    async def _transfer(self, path: str, buf: dict[str, int],
                        image: np.ndarray | None) -> tuple[int, np.ndarray]:
        """Move ``buf`` through port ``path`` of each of its Groups in parallel.

        Writes ``image`` (one row per Group) or, when it is None, reads; returns the cycles
        from the first request presented to completion (writes: stored in DRAM) and the image.
        """
        write = image is not None
        if has_dma(self.bus) and buf["lw_per_group"] > 0:
            return await self._transfer_dma(path, buf, image)
        lanes = self._lanes(path, buf, image)
        bus = self.bus
        data_field = "wdata__" if write else "rdata__"
        names: list[str] = []
        for lane in lanes:
            names += [lane.prefix + "req__ready", lane.prefix + data_field + "ready"
                      if write else lane.prefix + "rdata__valid"]
            if not write:
                names.append(lane.prefix + "rdata__payload")
                lane.set(bus, "rdata__ready", 1)
        total = buf["lw_per_group"]
        limit = 64 + total * self._timeout_per_lw
        start = bus.get(CYCLE)
        for _ in range(limit):
            busy = False
            for lane in lanes:
                if lane.req < len(lane.bursts):
                    busy = True
                    lane.set(bus, "req__valid", 1)
                    address, length = lane.bursts[lane.req]
                    lane.set(bus, "req__payload", self._request.pack(address, length, write))
                else:
                    lane.set(bus, "req__valid", 0)
                if lane.beat < total:
                    busy = True
                    if write:
                        lane.set(bus, "wdata__valid", 1)
                        lane.set(bus, "wdata__payload", pack_wdata(int(lane.words[lane.beat])))
                elif write:
                    lane.set(bus, "wdata__valid", 0)
            if not busy:
                break
            sampled = await bus.edge(names)
            k = 0
            for lane in lanes:
                req_ready, data_ok = sampled[k], sampled[k + 1]
                k += 2
                if lane.driven.get("req__valid") and req_ready:
                    lane.req += 1
                if write:
                    if lane.driven.get("wdata__valid") and data_ok:
                        lane.beat += 1
                else:
                    payload = sampled[k]
                    k += 1
                    if data_ok and lane.beat < total:
                        data, error = unpack_rdata(payload)
                        lane.words[lane.beat] = data
                        lane.error |= error
                        lane.beat += 1
        else:
            raise DriverError(f"{'write' if write else 'read'} of {total} LW per Group through "
                              f"the {path} port did not finish within {limit} cycles")
        for lane in lanes:
            lane.set(bus, "req__valid", 0)
            lane.set(bus, "wdata__valid" if write else "rdata__ready", 0)
        if write:
            await self._drain()
        if any(lane.error for lane in lanes):
            raise DriverError(f"the memory controller flagged an out-of-window address reading "
                              f"0x{buf['address']:x}+{total} LW")
        return bus.get(CYCLE) - start, np.stack([lane.words for lane in lanes])

    async def _transfer_dma(self, path: str, buf: dict[str, int],
                            image: np.ndarray | None) -> tuple[int, np.ndarray]:
        """:meth:`_transfer` as one round trip, through the testbench's DMA engines.

        The engines run the loop above in hardware, so the cycles are the same (the write is
        drained the same way, and the read's cycles are the engines' count of the same edges).
        """
        bus = self.bus
        if not has_dma(bus):
            raise DriverError("this simulator has no DMA engines (the top is not cosim_tb)")
        total = buf["lw_per_group"]
        start = bus.get(CYCLE)
        limit = 64 + total * self._timeout_per_lw
        try:
            words = await dma_transfer(bus, self.config.groups, path, buf, image, limit)
        except TimeoutError as exc:
            raise DriverError(str(exc)) from None
        if image is not None:
            await self._drain()
            return bus.get(CYCLE) - start, image
        assert words is not None
        if bus.get(DMA_ERROR):
            raise DriverError(f"the memory controller flagged an out-of-window address reading "
                              f"0x{buf['address']:x}+{total} LW")
        return bus.get(DMA_CYCLES), words

    async def _port_beats(self, port: int) -> list[list[int]]:
        """``[read_beats, write_beats]`` of requester ``port`` on every controller."""
        reads = await self._csr(csr_address("read_beats", port))
        writes = await self._csr(csr_address("write_beats", port))
        return [[r, w] for r, w in zip(reads, writes, strict=True)]

    async def _csr(self, address: int) -> list[int]:
        groups = range(self.config.groups)
        for g in groups:
            self.bus.set(csr_addr_port(g), address)
        await self.bus.edge(())
        await self.bus.edge(())
        return [self.bus.get(csr_rdata_port(g)) for g in groups]

    async def _op_write(self, msg: dict[str, Any]) -> dict[str, Any]:
        buf = msg["buffer"]
        image = unpack_words(msg["data"], (buf["groups"], buf["lw_per_group"]))
        cycles, _ = await self._transfer(msg["path"], buf, image)
        return {"cycles": cycles, "port_beats": await self._port_beats(PORTS[msg["path"]])}

    async def _op_read(self, msg: dict[str, Any]) -> dict[str, Any]:
        buf = msg["buffer"]
        cycles, image = await self._transfer(msg["path"], buf, None)
        return {"cycles": cycles, "data": pack_words(image),
                "port_beats": await self._port_beats(PORTS[msg["path"]])}

    # -- the layout converter ----------------------------------------------------------------

    async def _write_regs(self, regs: dict[int, int]) -> None:
        bus = self.bus
        bus.set(REG_WE, 1)
        for address, value in regs.items():
            bus.set(REG_ADDR, address)
            bus.set(REG_WDATA, value)
            await bus.edge(())
        bus.set(REG_WE, 0)

    async def _op_convert(self, msg: dict[str, Any]) -> dict[str, Any]:
        from mncore_hdl.converter import ErrorCode, ProgramError, compile_program, registers
        from mncore_hdl.layout import ConversionDescriptor

        descriptor = ConversionDescriptor.from_dict(msg["descriptor"])
        src, dst = msg["src"], msg["dst"]
        try:
            program = compile_program(descriptor, self.config)
        except ProgramError as exc:
            raise DriverError(f"the layout converter cannot run this conversion: {exc}") from None
        bus = self.bus
        setup = bus.get(CYCLE)
        await self._write_regs({int(Reg.CTRL): CTRL_CLEAR})  # a sticky done/error of the last run
        await self._write_regs(registers(program, src["group"], src["address"], dst["group"],
                                         dst["address"]))
        start = bus.get(CYCLE)
        await self._write_regs({int(Reg.CTRL): CTRL_START})
        limit = 1000 + 16 * (descriptor.read_lw + descriptor.write_lw)
        await self._wait(DONE, 1, limit, "layout conversion")
        await self._drain()
        cycles = bus.get(CYCLE) - start
        counters = {name: bus.get(name) for name in COUNTERS}
        if bus.get(ERROR):
            code = bus.get(ERROR_CODE)
            try:
                reason = ErrorCode(code).name
            except ValueError:
                reason = f"code {code}"
            raise DriverError(f"the layout converter raised its error flag: {reason} "
                              f"(error_code={code}) converting {src} -> {dst}")
        return {"cycles": cycles, "program_cycles": start - setup, "counters": counters}

    # -- the input-descriptor table ----------------------------------------------------------

    async def _op_bind(self, msg: dict[str, Any]) -> dict[str, Any]:
        buf = msg["buffer"]
        word = encode(Descriptor(buf["group"], buf["groups"], buf["address"],
                                 buf["lw_per_group"]))
        start = self.bus.get(CYCLE)
        self.bus.set(DESC_INDEX, msg["slot"])
        self.bus.set(DESC_WDATA, word)
        self.bus.set(DESC_WE, 1)
        await self.bus.edge(())
        self.bus.set(DESC_WE, 0)
        return {"cycles": self.bus.get(CYCLE) - start}

    async def _op_lookup(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.bus.set(DESC_INDEX, msg["slot"])
        await self.bus.edge(())
        desc = decode(self.bus.get(DESC_RDATA))
        return {"descriptor": None if desc is None else desc.__dict__}

    # -- the command track of the waves -----------------------------------------------------

    async def _op_mark(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Mark the host command that starts now (``cosim_tb``'s ``mark_*`` registers) and
        pause or resume the dump (``waves_off``); no clock edge passes. ``msg`` holds
        ``kind`` (a ``CommandKind``), ``call``, ``buffer``, ``number`` (the command's sequence
        number; ``seq`` is the protocol's) and ``waves_off``.

        Returns ``time``, the simulation time in the dump's units (None where the bus cannot
        say), and ``marked``: False on a top without the track (``mncore2:rtl``).
        """
        bus = self.bus
        has = getattr(bus, "has", None)
        if has is None or not has(MARK_KIND):
            return {"marked": False, "time": None}
        for name, key in ((MARK_KIND, "kind"), (MARK_CALL, "call"), (MARK_BUFFER, "buffer"),
                          (MARK_SEQ, "number"), (WAVES_OFF, "waves_off")):
            bus.set(name, int(msg[key]))
        now = getattr(bus, "now", None)
        return {"marked": True, "time": None if now is None else int(now())}

    # -- inspection --------------------------------------------------------------------------

    async def _op_counters(self, msg: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, int] = {f"converter.{n}": self.bus.get(n) for n in COUNTERS}
        out["converter.busy"] = self.bus.get(BUSY)
        out["cycle"] = self.bus.get(CYCLE)
        for path, port in PORTS.items():
            for g, (r, w) in enumerate(await self._port_beats(port)):
                out[f"mc{g}.{path}.read_beats"] = r
                out[f"mc{g}.{path}.write_beats"] = w
        for name in REPORTED_COUNTERS:
            for g, value in enumerate(await self._csr(csr_address(name))):
                out[f"mc{g}.{name}"] = value
        return {"counters": out}

    async def _op_peek(self, msg: dict[str, Any]) -> dict[str, Any]:
        bus = self.bus
        if has_dma(bus):  # one bulk dump through the testbench's back door
            words = await dump_words(bus, msg["group"], msg["address"], msg["count"])
        else:
            words = self.bus.mem_read(msg["group"], msg["address"], msg["count"])
        return {"data": pack_words(words)}

    async def _op_poke(self, msg: dict[str, Any]) -> dict[str, Any]:
        words = unpack_words(msg["data"], (-1,))
        bus = self.bus
        if has_dma(bus):
            await load_words(bus, msg["group"], msg["address"], words)
        else:
            self.bus.mem_write(msg["group"], msg["address"], words)
        return {"count": len(words)}
