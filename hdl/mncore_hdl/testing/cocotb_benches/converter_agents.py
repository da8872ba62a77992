"""cocotb agents for the layout converter benches: register driver, back door, cases, checker."""

from __future__ import annotations

import json
import random

import numpy as np
import torch
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from mncore_hdl.arch import LW_BITS, MNCORE2_SIM, ArchConfig
from mncore_hdl.contracts.converter import COUNTERS, CTRL_START
from mncore_hdl.contracts.cosim import (
    BACKING_STORE,
    MC_IDLE,
    STREAMS,
    csr_addr_port,
    csr_rdata_port,
    requester_prefix,
)
from mncore_hdl.contracts.memctrl import csr_address
from mncore_hdl.converter import Reg, compile_program, registers
from mncore_hdl.converter.program import ProgramError
from mncore_hdl.layout import DTYPES, UnsupportedConversion, conversion, from_device, to_device
from mncore_hdl.layout.random_layouts import random_layout, random_shape
from mncore_hdl.settings import HDL

from .coverage_points import converter_monitor

CLOCK_NS = 10


def bench_config() -> ArchConfig:
    """The design's config, passed by the launcher as JSON in ``CONV_CONFIG``."""
    text = HDL["CONV_CONFIG"].get()
    return ArchConfig.from_dict(json.loads(text)) if text else MNCORE2_SIM


def _bitwise(tensor: torch.Tensor) -> torch.Tensor:
    """Floats as their raw bits (NaN payloads, signed zeros); ints and bools as they are."""
    if not tensor.is_floating_point():
        return tensor
    return tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int32)


def random_tensor(rng: random.Random, shape, dtype: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.getrandbits(32))
    return torch.randn(shape, generator=gen).to(getattr(torch, dtype))


def random_pair(rng: random.Random, max_numel: int = 2048, max_lw: int = 2048):
    """A random (src, dst) layout pair the converter can execute, with its descriptor."""
    config = bench_config()
    while True:
        dtype = rng.choice(list(DTYPES))
        shape = random_shape(rng, max_numel=max_numel)
        a = random_layout(rng, shape, dtype, config.groups, max_lw)
        b = random_layout(rng, shape, dtype, config.groups, max_lw)
        try:
            desc = conversion(a, b)
            compile_program(desc, config)
        except (UnsupportedConversion, ProgramError):
            continue
        return a, b, desc


class TB:
    """Clock, reset, register writes, memory back door and the conversion checker."""

    def __init__(self, dut):
        self.dut = dut
        self.config = bench_config()
        self.errors = 0
        self.mem_path = HDL["CONV_MEM_PATH"].get() or BACKING_STORE["harness"]
        seed = HDL["CONV_SEED"].get()
        self.rng = random.Random(seed)
        self.cov = converter_monitor()
        Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()

    async def reset(self) -> None:
        dut = self.dut
        dut.rst.value = 1
        dut.reg_we.value = 0
        for g in range(self.config.groups):
            for path in ("host", "compute"):  # the harness has host ports only
                pre = requester_prefix(path, g)
                if not hasattr(dut, pre + "req__valid"):
                    continue
                for stream, driven in STREAMS.items():
                    if driven:
                        getattr(dut, f"{pre}{stream}__valid").value = 0
                    else:
                        getattr(dut, f"{pre}{stream}__ready").value = 1
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await RisingEdge(dut.clk)

    def error(self, msg: str) -> None:
        self.errors += 1
        self.dut._log.error(msg)

    # -- memory back door ------------------------------------------------------------------
    def _mem(self, group: int):
        handle = self.dut
        for part in self.mem_path.format(g=group).split("."):
            handle = getattr(handle, part)
        return handle

    def load(self, group: int, addr: int, words) -> None:
        mem = self._mem(group)
        for i, w in enumerate(words):
            mem[addr + i].value = int(w)

    def dump(self, group: int, addr: int, count: int) -> np.ndarray:
        mem = self._mem(group)
        return np.array([int(mem[addr + i].value) for i in range(count)], dtype=np.uint64)

    def load_image(self, image: np.ndarray, group: int, addr: int) -> None:
        for g in range(image.shape[0]):
            self.load(group + g, addr, image[g])

    def dump_image(self, shape, group: int, addr: int) -> np.ndarray:
        return np.stack([self.dump(group + g, addr, shape[1]) for g in range(shape[0])])

    # -- registers -------------------------------------------------------------------------
    async def write_regs(self, regs: dict[int, int]) -> None:
        dut = self.dut
        for addr, value in regs.items():
            dut.reg_addr.value = addr
            dut.reg_wdata.value = value
            dut.reg_we.value = 1
            await RisingEdge(dut.clk)
        dut.reg_we.value = 0

    async def read_reg(self, addr: int) -> int:
        self.dut.reg_addr.value = addr
        await RisingEdge(self.dut.clk)
        return int(self.dut.reg_rdata.value)

    async def run(self, regs: dict[int, int], timeout_us: float = 20_000) -> dict[str, int]:
        """Program, start, wait for done (no per-cycle Python), return status and counters.

        On the memory-system top also ``refreshes``: the refreshes Group 0's controller (all
        refresh together) began from the start to ``done`` (its ``refreshes`` CSR)."""
        dut = self.dut
        csr = getattr(dut, csr_addr_port(0), None)
        if csr is not None:
            csr.value = csr_address("refreshes")
        await self.write_regs(regs)
        before = self._refreshes()
        await self.write_regs({Reg.CTRL: CTRL_START})
        await RisingEdge(dut.clk)
        if not int(dut.done.value):
            await with_timeout(RisingEdge(dut.done), timeout_us, "us")
        await RisingEdge(dut.clk)
        after = self._refreshes()
        await self.drain()
        stats = {name: int(getattr(dut, name).value) for name in
                 ("error", "error_code", *COUNTERS)}
        if before is not None and after is not None:
            stats["refreshes"] = after - before
        if self.cov:
            self.cov.conversion(regs, stats["error_code"])
        return stats

    def _refreshes(self) -> int | None:
        """Group 0's ``refreshes`` CSR (selected by :meth:`run`), or None without CSR ports."""
        rdata = getattr(self.dut, csr_rdata_port(0), None)
        return None if rdata is None else int(rdata.value)

    async def drain(self) -> None:
        """Wait until every memory controller is idle (its accepted writes are in memory)."""
        if not hasattr(self.dut, MC_IDLE):
            return
        full = (1 << self.config.groups) - 1
        while int(getattr(self.dut, MC_IDLE).value) != full:
            await RisingEdge(self.dut.clk)

    # -- one checked conversion ----------------------------------------------------------------
    async def convert(self, a, b, desc, tensor, src=(0, 0x100), dst=(0, 0x4000),
                      label: str = "", prog=None) -> tuple[np.ndarray, dict[str, int]]:
        """Convert ``tensor`` laid out as ``a`` into ``b`` on the RTL; check against the model.

        ``prog``: the register program to run (default: ``compile_program(desc)``)."""
        src_img = to_device(tensor, a)
        self.load_image(src_img, *src)
        # Garbage in the destination proves that padding and gaps are written as zeros.
        junk = np.array([self.rng.getrandbits(LW_BITS) for _ in range(desc.dst_lw_per_group)],
                        dtype=np.uint64)
        for g in range(desc.dst_groups):
            self.load(dst[0] + g, dst[1], junk)
        prog = prog or compile_program(desc, self.config)
        stats = await self.run(registers(prog, src[0], src[1], dst[0], dst[1]))
        got = self.dump_image((desc.dst_groups, desc.dst_lw_per_group), *dst)
        want = desc.execute(src_img)
        if stats["error"]:
            self.error(f"{label} {a} -> {b}: error code {stats['error_code']}")
        elif not np.array_equal(got, want):
            bad = np.argwhere(got != want)[:4]
            detail = ", ".join(f"G{g}+{i:#x}: expected {want[g, i]:#018x} got {got[g, i]:#018x}"
                               for g, i in bad)
            self.error(f"{label} {a} -> {b}: {len(np.argwhere(got != want))} LWs differ "
                       f"({detail})")
        elif not torch.equal(_bitwise(from_device(got, b)), _bitwise(tensor)):
            self.error(f"{label} {a} -> {b}: from_device(dst) differs from the tensor")
        if stats["beats_written"] != desc.write_lw:
            self.error(f"{label}: wrote {stats['beats_written']} beats, expected {desc.write_lw}")
        return got, stats
