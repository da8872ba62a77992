"""cocotb benches of the layout converter (run by test_converter*.py; never imported by pytest)."""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from mncore_hdl.arch import LW_BITS
from mncore_hdl.contracts.converter import READ
from mncore_hdl.contracts.cosim import requester_prefix
from mncore_hdl.contracts.memctrl import RequestFormat, pack_wdata
from mncore_hdl.converter import ErrorCode, Reg, compile_program, registers
from mncore_hdl.layout import conversion, host_layout, native_layout, to_device
from mncore_hdl.settings import HDL

from .converter_agents import TB, random_pair, random_tensor


def _cases() -> int:
    return HDL["CONV_CASES"].get()


def _finish(tb: TB) -> None:
    assert tb.errors == 0, f"{tb.errors} mismatches (seed {HDL['CONV_SEED'].get()})"


@cocotb.test()
async def random_pairs(dut):
    """Seeded random layout pairs (Groups, tiles, transposes, padding, all dtypes)."""
    tb = TB(dut)
    await tb.reset()
    for i in range(_cases()):
        a, b, desc = random_pair(tb.rng)
        tensor = random_tensor(tb.rng, a.shape, a.dtype)
        src = (tb.rng.randrange(tb.config.groups - desc.src_groups + 1), 0x40 * tb.rng.randrange(4))
        dst = (tb.rng.randrange(tb.config.groups - desc.dst_groups + 1),
               0x4000 + tb.rng.randrange(8))
        _, stats = await tb.convert(a, b, desc, tensor, src, dst, label=f"case {i}")
        dut._log.info(f"case {i}: {a} -> {b} ({a.dtype}) {stats}")
    _finish(tb)


@cocotb.test()
async def identity(dut):
    """Identity conversions copy the footprint exactly."""
    tb = TB(dut)
    await tb.reset()
    for shape, dtype in (((16, 24), "float32"), ((9, 13), "float16"), ((40, 8), "bfloat16")):
        for layout in (host_layout(shape, dtype), native_layout(shape, dtype, tb.config)):
            tensor = random_tensor(tb.rng, shape, dtype)
            await tb.convert(layout, layout, conversion(layout, layout), tensor,
                             label="identity")
    _finish(tb)


async def _host_traffic(tb: TB, group: int, base: int, count: int, log: list) -> None:
    """Write then read back ``count`` bursts on a host port, one request at a time."""
    dut = tb.dut
    pre = requester_prefix("host", group)
    request = RequestFormat.of(tb.config)
    for k in range(count):
        addr = base + 16 * k
        words = [tb.rng.getrandbits(LW_BITS) for _ in range(8)]
        getattr(dut, pre + "req__payload").value = request.pack(addr, 8, True)
        getattr(dut, pre + "req__valid").value = 1
        getattr(dut, pre + "wdata__valid").value = 1
        sent = 0
        getattr(dut, pre + "wdata__payload").value = pack_wdata(words[0])
        req_done = False
        while sent < 8 or not req_done:
            await RisingEdge(dut.clk)
            if not req_done and int(getattr(dut, pre + "req__ready").value):
                req_done = True
                getattr(dut, pre + "req__valid").value = 0
            if sent < 8 and int(getattr(dut, pre + "wdata__ready").value):
                sent += 1
                if sent < 8:
                    getattr(dut, pre + "wdata__payload").value = pack_wdata(words[sent])
                else:
                    getattr(dut, pre + "wdata__valid").value = 0
        log.append((group, addr, words))


@cocotb.test()
async def with_host_traffic(dut):
    """A conversion while the host port of the same Groups writes elsewhere."""
    tb = TB(dut)
    await tb.reset()
    shape, dtype = (64, 48), "float32"
    a, b = host_layout(shape, dtype), native_layout(shape, dtype, tb.config)
    desc = conversion(a, b)
    tensor = random_tensor(tb.rng, shape, dtype)
    log: list = []
    hosts = [cocotb.start_soon(_host_traffic(tb, g, 0x6000, 12, log))
             for g in range(tb.config.groups)]
    await tb.convert(a, b, desc, tensor, (0, 0x100), (0, 0x4000), label="with host")
    for h in hosts:
        await h
    for group, addr, words in log:
        got = tb.dump(group, addr, 8)
        if list(map(int, got)) != words:
            tb.error(f"host write G{group}+{addr:#x} lost: {got} != {words}")
    _finish(tb)


@cocotb.test()
async def invalid_descriptor(dut):
    """Programs the converter cannot execute raise the error flag and write nothing."""
    tb = TB(dut)
    await tb.reset()
    shape, dtype = (32, 32), "float16"
    a, b = host_layout(shape, dtype), native_layout(shape, dtype, tb.config)
    desc = conversion(a, b)
    good = registers(compile_program(desc, tb.config), 0, 0x100, 0, 0x4000)
    window = tb.config.sim_window_lw
    bad = {
        ErrorCode.ELEM_BITS: {Reg.ELEM_BITS: 8},
        ErrorCode.LOOPS: {Reg.N_GATHER: 7},
        ErrorCode.SRC_RANGE: {Reg.SRC_ADDR: window - 4},
        ErrorCode.DST_RANGE: {Reg.DST_GROUP: tb.config.groups},
        ErrorCode.BUFFER: {Reg.BURST: 256, Reg.N_READ: 1, READ.base: 64},  # READ[0].extent
        ErrorCode.OVERLAP: {Reg.DST_ADDR: 0x110},
    }
    for code, change in bad.items():
        sentinel = np.array([tb.rng.getrandbits(LW_BITS) for _ in range(desc.dst_lw_per_group)],
                            dtype=np.uint64)
        dst_addr = change.get(Reg.DST_ADDR, 0x4000)
        for g in range(tb.config.groups):
            tb.load(g, dst_addr, sentinel)
        stats = await tb.run({**good, **change})
        if not stats["error"] or stats["error_code"] != code:
            tb.error(f"{code.name}: expected error code {int(code)}, got {stats}")
        if stats["beats_read"] or stats["beats_written"]:
            tb.error(f"{code.name}: the converter moved data: {stats}")
        for g in range(tb.config.groups):
            if not np.array_equal(tb.dump(g, dst_addr, len(sentinel)), sentinel):
                tb.error(f"{code.name}: Group {g} destination was modified")
    # After an error, a good program runs normally.
    await tb.convert(a, b, desc, random_tensor(tb.rng, shape, dtype), label="after errors")
    _finish(tb)


@cocotb.test()
async def round_trips(dut):
    """A -> B -> A on the RTL reproduces the source image exactly."""
    tb = TB(dut)
    await tb.reset()
    for i in range(_cases()):
        a, b, desc = random_pair(tb.rng)
        try:
            back = conversion(b, a)
            compile_program(back, tb.config)
        except ValueError:
            continue
        tensor = random_tensor(tb.rng, a.shape, a.dtype)
        mid, _ = await tb.convert(a, b, desc, tensor, (0, 0x100), (0, 0x4000), label=f"rt{i}")
        tb.load_image(mid, 0, 0x4000)
        got, _ = await tb.convert(b, a, back, tensor, (0, 0x4000), (0, 0x6000),
                                  label=f"rt{i} back")
        if not np.array_equal(got, to_device(tensor, a)):
            tb.error(f"round trip {i}: {a} -> {b} -> {a} does not reproduce the source")
    _finish(tb)
