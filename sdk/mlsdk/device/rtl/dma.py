"""Long operations as one round trip each, on the testbench top ``cosim_tb``.

On the cocotb simulators the design runs inside ``cosim_tb`` (see :mod:`mncore_hdl.top.cosim_tb`),
which adds a host DMA engine per Group and a file-based back door. With them:

- a host write or read (HostWrite, HostRead, a Launch's loads and stores) is one bulk load of
  the staging memories, one ``dma_go``, one wait for ``dma_done`` and, for a read, one bulk
  dump: no Python per cycle, and the same cycles as the driver's beat-by-beat loop because the
  engines implement that loop in hardware;
- ``poke``/``peek`` of a DRAM image is one file load or dump per Group, with no clock edge
  (raw words on Verilator, hex lines on Icarus: ``mem_binary``).

The image itself may already be a file in the back door's format, in the simulator's working
folder (the session's private run folder): the runtime wrote it there (:func:`write_word_file`)
and the request names it; a load then moves it into place (a rename) and a dump is renamed for
the runtime to read (:func:`read_word_file`). No image crosses the socket or the server's
Python that way.

Everything here is written against :class:`BulkBus`, the driver's bus plus a scratch file and a
wait for a signal to change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeGuard

import numpy as np
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.tooling.files import atomic_write, hand_over

__all__ = ["BulkBus", "has_dma", "load_words", "dump_words", "load_file", "dump_file",
           "dma_transfer", "write_word_file", "read_word_file"]

#: A Group's image as the driver gets or gives it: its words, or a file in the back door's
#: format (:func:`write_word_file` for a load; what a dump writes, :func:`read_word_file`).
Rows = np.ndarray | list[Path]

_HEX = re.compile(r"[0-9a-fA-F]+")


class BulkBus(Protocol):
    """What the DMA path needs from a simulator binding (a superset of the driver's bus)."""

    memfile: Path
    #: The file's format (``cosim_tb``'s ``mem_binary``): raw 64-bit words, or hex lines.
    mem_binary: bool

    def set(self, name: str, value: int) -> None: ...

    def get(self, name: str) -> int: ...

    def has(self, name: str) -> bool: ...

    async def edge(self, names: Sequence[str]) -> list[int]: ...

    async def wait_until(self, name: str, value: int, max_cycles: int) -> bool: ...

    async def wait_change(self, name: str) -> None: ...


def has_dma(bus: object) -> TypeGuard[BulkBus]:
    """Whether ``bus`` drives a ``cosim_tb`` (DMA engines and file back door)."""
    has = getattr(bus, "has", None)
    return bool(has is not None and getattr(bus, "memfile", None) is not None
                and has(tb.DMA_GO) and has(tb.MEM_GO))


def write_word_file(path: Path, words: np.ndarray, binary: bool) -> None:
    """The back-door file for a load: raw big-endian words (``$fread``) or hex lines."""
    data = np.ascontiguousarray(words, dtype=">u8").tobytes()
    # one 16-digit word per line when not binary
    atomic_write(path, data if binary else data.hex("\n", 8) + "\n", mode=None)


def read_word_file(path: Path, count: int, binary: bool) -> np.ndarray:
    """The words of a dump: raw little-endian words (``%u``) or ``$writememh`` lines."""
    if binary:
        data = path.read_bytes()
        if len(data) != 8 * count:
            raise RuntimeError(f"the simulator dumped {len(data)} bytes into {path}, "
                               f"expected {8 * count}")
        return np.frombuffer(data, dtype="<u8").astype(np.uint64)
    words = []
    for line in path.read_text().splitlines():
        line = line.split("//", 1)[0].strip()
        if line and not line.startswith("@"):
            words.append(line)
    if len(words) != count:
        raise RuntimeError(f"the simulator dumped {len(words)} words into {path}, "
                           f"expected {count}")
    try:  # every word 16 hex digits: one conversion for the whole dump
        if all(len(w) == 16 for w in words):
            return np.frombuffer(bytes.fromhex("".join(words)), dtype=">u8").astype(np.uint64)
    except ValueError:
        pass  # an x or z digit somewhere
    # An x/z digit (a word never written) reads as 0, as the per-word back door did.
    return np.array([int(w, 16) if _HEX.fullmatch(w) else 0 for w in words], dtype=np.uint64)


async def _mem(bus: BulkBus, sel: int, lo: int, count: int, dump: bool) -> None:
    bus.set(tb.MEM_SEL, sel)
    bus.set(tb.MEM_LO, lo)
    bus.set(tb.MEM_HI, lo + count - 1)
    bus.set(tb.MEM_DIR, int(dump))
    bus.set(tb.MEM_GO, 1 - bus.get(tb.MEM_GO))
    await bus.wait_change(tb.MEM_ACK)


async def load_words(bus: BulkBus, sel: int, lo: int, words: np.ndarray) -> None:
    """Store ``words`` at ``lo`` of memory ``sel`` (``g``: DRAM of Group ``g``,
    ``groups + g``: its staging memory), with no clock edge."""
    if len(words) == 0:
        return
    write_word_file(bus.memfile, words, bus.mem_binary)
    await _mem(bus, sel, lo, len(words), dump=False)


async def load_file(bus: BulkBus, sel: int, lo: int, count: int, source: Path) -> None:
    """Store the ``count`` words of file ``source`` (the back door's format; it is consumed)
    at ``lo`` of memory ``sel``, with no clock edge."""
    if count == 0:
        return
    hand_over(source, bus.memfile)
    await _mem(bus, sel, lo, count, dump=False)


async def dump_file(bus: BulkBus, sel: int, lo: int, count: int, target: Path) -> None:
    """Dump ``count`` words from ``lo`` of memory ``sel`` into file ``target`` (the back
    door's format), with no clock edge."""
    if count == 0:
        target.write_bytes(b"")
        return
    await _mem(bus, sel, lo, count, dump=True)
    hand_over(bus.memfile, target)


async def dump_words(bus: BulkBus, sel: int, lo: int, count: int) -> np.ndarray:
    """``count`` words from ``lo`` of memory ``sel``, with no clock edge."""
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    await _mem(bus, sel, lo, count, dump=True)
    return read_word_file(bus.memfile, count, bus.mem_binary)


async def dma_transfer(bus: BulkBus, groups: int, path: str, buf: dict[str, int],
                       image: Rows | None, max_cycles: int,
                       into: list[Path] | None = None) -> np.ndarray | None:
    """Move ``buf`` through port ``path`` of each of its Groups in parallel, in hardware.

    Writes ``image`` (one row, or one file, per Group) or, when None, reads and returns the
    image (or, given ``into``, dumps each Group's part into its file there and returns None).
    Returns at the clock edge that took the last beat, where the beat-by-beat loop ends too
    (the caller drains the controllers after a write, as on that path); ``dma_cycles`` and
    ``dma_error`` then hold the transfer's edges and per-Group out-of-window flags. Raises
    :class:`TimeoutError` when ``dma_done`` does not rise within ``max_cycles``.
    """
    write = image is not None
    total = buf["lw_per_group"]
    first = buf["group"]
    if image is not None:
        for i in range(buf["groups"]):
            row = image[i]
            if isinstance(row, Path):
                await load_file(bus, groups + first + i, 0, total, row)
            else:
                await load_words(bus, groups + first + i, 0, row)
    mask = sum(1 << (first + i) for i in range(buf["groups"]))
    bus.set(tb.DMA_WRITE, int(write))
    bus.set(tb.DMA_PATH, tb.dma_path_code(path))
    bus.set(tb.DMA_GROUPS, mask)
    bus.set(tb.DMA_ADDR, buf["address"])
    bus.set(tb.DMA_LEN, total)
    bus.set(tb.DMA_GO, 1)
    ok = await bus.wait_until(tb.DMA_DONE, 1, max_cycles)
    bus.set(tb.DMA_GO, 0)
    if not ok:
        raise TimeoutError(f"{'write' if write else 'read'} of {total} LW per Group through "
                           f"the {path} port did not finish within {max_cycles} cycles")
    if write:
        return None
    if into is not None:
        for i, target in enumerate(into):
            await dump_file(bus, groups + first + i, 0, total, target)
        return None
    return np.stack([await dump_words(bus, groups + first + i, 0, total)
                     for i in range(buf["groups"])])
