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
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
)
from mncore_hdl.contracts.memctrl import (
    PORTS,
    REPORTED_COUNTERS,
    RequestFormat,
    csr_address,
    max_burst,
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

from .beats import make_lanes, run_beats
from .bus import Bus
from .dma import (
    BulkBus,
    Rows,
    dma_transfer,
    dump_file,
    dump_words,
    has_dma,
    load_file,
    load_words,
)

__all__ = ["Bus", "Driver", "DriverError", "PORTS", "pack_words", "unpack_words"]

#: Slices of at most this many cycles between progress reports while waiting in hardware.
PROGRESS_CHUNK = 20_000
#: A file a request or an answer names: a plain name in the simulator's working folder.
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


class DriverError(Exception):
    """An operation the hardware refused or did not finish (the message says which and why)."""


def pack_words(words: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(words, dtype="<u8").tobytes()).decode("ascii")


def unpack_words(text: str, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(text), dtype="<u8").astype(np.uint64)
    return raw.reshape(shape)


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
    stats : dict, optional
        Seconds the caller counts (the cocotb server: ``protocol_s``, ``op_s``); the
        ``profile`` operation answers them with the bus's own ``stats``, if it keeps any.
    """

    def __init__(self, bus: Bus, config: ArchConfig,
                 progress: Callable[[int, int], None] | None = None,
                 stats: dict[str, float] | None = None):
        self.bus = bus
        self.config = config
        self.progress = progress
        self.stats = {} if stats is None else stats
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

    async def _transfer(self, path: str, buf: dict[str, int],
                        image: Rows | None) -> tuple[int, Rows]:
        """Move ``buf`` through port ``path`` of each of its Groups in parallel.

        Writes ``image`` (one row per Group) or, when it is None, reads; returns the cycles
        from the first request presented to completion (writes: stored in DRAM) and the image.
        """
        write = image is not None
        if has_dma(self.bus) and buf["lw_per_group"] > 0:
            return await self._transfer_dma(path, buf, image)
        if isinstance(image, list):  # files of an empty buffer
            image = np.zeros((buf["groups"], 0), dtype=np.uint64)
        if path not in TOP_PATHS:
            raise DriverError(f"port path must be 'host' or 'compute', not {path!r}")
        lanes = make_lanes(path, buf, image, self._max_burst)
        bus = self.bus
        total = buf["lw_per_group"]
        limit = 64 + total * self._timeout_per_lw
        start = bus.get(CYCLE)
        if not await run_beats(bus, lanes, write, total, limit, self._request):
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

    async def _transfer_dma(self, path: str, buf: dict[str, int], image: Rows | None,
                            into: list[Path] | None = None) -> tuple[int, Rows]:
        """:meth:`_transfer` as one round trip, through the testbench's DMA engines.

        The engines run the loop above in hardware, so the cycles are the same (the write is
        drained the same way, and the read's cycles are the engines' count of the same edges).
        A read given ``into`` dumps each Group's part into its file and returns ``into``.
        """
        bus = self.bus
        if not has_dma(bus):
            raise DriverError("this simulator has no DMA engines (the top is not cosim_tb)")
        total = buf["lw_per_group"]
        start = bus.get(CYCLE)
        limit = 64 + total * self._timeout_per_lw
        try:
            words = await dma_transfer(bus, self.config.groups, path, buf, image, limit, into)
        except TimeoutError as exc:
            raise DriverError(str(exc)) from None
        if image is not None:
            await self._drain()
            return bus.get(CYCLE) - start, image
        if bus.get(DMA_ERROR):
            raise DriverError(f"the memory controller flagged an out-of-window address reading "
                              f"0x{buf['address']:x}+{total} LW")
        if into is not None:
            return bus.get(DMA_CYCLES), into
        assert words is not None
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

    # -- images in files (the bulk back door's format, in the simulator's working folder) ---

    def _bulk(self, what: str) -> BulkBus:
        """The bus, when images may come and go as files (DriverError otherwise)."""
        bus = self.bus
        if not has_dma(bus):
            raise DriverError(f"{what} needs the testbench's bulk back door, which this "
                              "simulator does not have")
        return bus

    def _files(self, names: object, count: int, what: str) -> list[Path]:
        """The ``count`` files a request names, in the simulator's working folder."""
        bus = self._bulk(what)
        if not (isinstance(names, list) and len(names) == count
                and all(isinstance(n, str) and FILE_NAME.fullmatch(n) for n in names)):
            raise DriverError(f"{what} names {names!r}; expected {count} plain file name(s)")
        return [bus.memfile.parent / name for name in names]

    def _outputs(self, count: int) -> list[Path]:
        """Files for an answer's image: one per row, named after this operation."""
        folder = self._bulk("an image answered in files").memfile.parent
        return [folder / f"out-{self.done_ops}-{i}.dat" for i in range(count)]

    def _image_in(self, msg: dict[str, Any], shape: tuple[int, int]) -> Rows:
        """A request's image: its ``files`` (one per row), or its base64 ``data``."""
        if "files" in msg:
            return self._files(msg["files"], shape[0], f"{msg.get('op')}'s files")
        return unpack_words(msg["data"], shape)

    async def _op_write(self, msg: dict[str, Any]) -> dict[str, Any]:
        buf = msg["buffer"]
        image = self._image_in(msg, (buf["groups"], buf["lw_per_group"]))
        cycles, _ = await self._transfer(msg["path"], buf, image)
        return {"cycles": cycles, "port_beats": await self._port_beats(PORTS[msg["path"]])}

    async def _op_read(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A read through a port; with ``to_files`` the image is answered in files."""
        buf = msg["buffer"]
        if msg.get("to_files") and buf["lw_per_group"] > 0:
            into = self._outputs(buf["groups"])
            cycles, _ = await self._transfer_dma(msg["path"], buf, None, into)
            image: dict[str, Any] = {"files": [p.name for p in into]}
        else:
            cycles, words = await self._transfer(msg["path"], buf, None)
            assert isinstance(words, np.ndarray)
            image = {"data": pack_words(words)}
        return {"cycles": cycles, **image,
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

    async def _op_profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Where the simulator's side spent its time so far (seconds and counts, summed over
        the session): the caller's :attr:`stats` and the bus's, plus ``ops``."""
        return {"profile": {**self.stats, **getattr(self.bus, "stats", {}),
                            "ops": self.done_ops}}

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
        """DRAM words by back door; with ``to_files`` answered in a file."""
        bus = self.bus
        if msg.get("to_files"):
            [target] = self._outputs(1)
            await dump_file(self._bulk("peek"), msg["group"], msg["address"], msg["count"],
                            target)
            return {"files": [target.name]}
        if has_dma(bus):  # one bulk dump through the testbench's back door
            words = await dump_words(bus, msg["group"], msg["address"], msg["count"])
        else:
            words = self.bus.mem_read(msg["group"], msg["address"], msg["count"])
        return {"data": pack_words(words)}

    async def _op_poke(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Store DRAM words by back door: ``count`` words of the file ``files`` names, or the
        base64 ``data``."""
        if "files" in msg:
            [source] = self._files(msg["files"], 1, "poke's file")
            count = msg.get("count")
            if not isinstance(count, int) or count < 0:
                raise DriverError(f"poke of a file needs its word count, not {count!r}")
            await load_file(self._bulk("poke"), msg["group"], msg["address"], count, source)
            return {"count": count}
        words = unpack_words(msg["data"], (-1,))
        bus = self.bus
        if has_dma(bus):
            await load_words(bus, msg["group"], msg["address"], words)
        else:
            self.bus.mem_write(msg["group"], msg["address"], words)
        return {"count": len(words)}
