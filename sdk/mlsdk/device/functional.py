"""The functional model: numpy DRAM per Group and analytic timing from the architecture config."""

from __future__ import annotations

import numpy as np
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import ConversionDescriptor

from .base import PAGE_LW, Device, DramSnapshot
from .commands import Buffer

__all__ = ["FunctionalDevice", "SparseDram"]


class SparseDram:
    """One Group's DRAM as a sparse store of :data:`~mlsdk.device.base.PAGE_LW`-LW pages of
    uint64 LWs; unwritten LWs read as zero."""

    def __init__(self, lw_size: int):
        self.lw_size = lw_size
        self.pages: dict[int, np.ndarray] = {}

    def _spans(self, address: int, count: int):
        end = address + count
        if address < 0 or end > self.lw_size:
            raise IndexError(
                f"DRAM access 0x{address:x}..0x{end:x} is outside the Group's "
                f"0x{self.lw_size:x} LWs"
            )
        while address < end:
            page, offset = divmod(address, PAGE_LW)
            n = min(PAGE_LW - offset, end - address)
            yield page, offset, n
            address += n

    def read(self, address: int, count: int) -> np.ndarray:
        out = np.zeros(count, dtype=np.uint64)
        pos = 0
        for page, offset, n in self._spans(address, count):
            data = self.pages.get(page)
            if data is not None:
                out[pos:pos + n] = data[offset:offset + n]
            pos += n
        return out

    def write(self, address: int, words: np.ndarray) -> None:
        pos = 0
        for page, offset, n in self._spans(address, len(words)):
            data = self.pages.get(page)
            if data is None:
                data = self.pages[page] = np.zeros(PAGE_LW, dtype=np.uint64)
            data[offset:offset + n] = words[pos:pos + n]
            pos += n

    def snapshot(self) -> dict[int, np.ndarray]:
        """A copy of every non-zero page, for comparing two memories."""
        return {p: d.copy() for p, d in self.pages.items() if d.any()}


class FunctionalDevice(Device):
    """MN-Core 2 as numpy arrays: exact data, modeled cycles.

    Cycles come from :mod:`mncore_hdl.timing` (memory streams) and
    :mod:`mncore_hdl.converter_timing` (conversions), the analytic models checked against the
    RTL; the Groups' controllers work in parallel, so a buffer spread over Groups costs the
    cycles of one Group's share.
    """

    cycles_kind = "modeled"

    def __init__(self, config: ArchConfig, name: str):
        super().__init__(config, name)
        self.drams = [SparseDram(config.dram_lw_per_group) for _ in range(config.groups)]

    def _dram_read(self, path: str, buf: Buffer) -> tuple[np.ndarray, int]:
        image = self.peek(buf)
        return image, self._stream_cycles(buf.lw_per_group, write=False)

    def _dram_write(self, path: str, buf: Buffer, image: np.ndarray) -> int:
        for i in range(buf.groups):
            self.drams[buf.group + i].write(buf.address, image[i])
        return self._stream_cycles(buf.lw_per_group, write=True)

    def _convert(self, descriptor: ConversionDescriptor, src: Buffer, dst: Buffer) -> int:
        from mncore_hdl.converter_timing import conversion_cycles

        cycles = conversion_cycles(self.config, descriptor, src_group=src.group,
                                   dst_group=dst.group)
        image = descriptor.execute(self.peek(src))
        for i in range(dst.groups):
            self.drams[dst.group + i].write(dst.address, image[i])
        return cycles

    def _stream_cycles(self, lw: int, *, write: bool) -> int:
        from mncore_hdl.timing import stream_cycles

        return stream_cycles(self.config, lw, write=write)

    def peek(self, buf: Buffer) -> np.ndarray:
        rows = [self.drams[buf.group + i].read(buf.address, buf.lw_per_group)
                for i in range(buf.groups)]
        return np.stack(rows)

    def _poke(self, buf: Buffer, image: np.ndarray) -> None:
        for i in range(buf.groups):
            self.drams[buf.group + i].write(buf.address, image[i])

    def dram_snapshot(self) -> DramSnapshot:
        """Every Group's non-zero pages (to compare with another backend's DRAM)."""
        return [d.snapshot() for d in self.drams]
