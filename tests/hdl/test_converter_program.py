"""The converter's program compiler and timing model against the golden descriptor."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.converter import Reg
from mncore_hdl.converter import ProgramError, compile_program, registers, simulate_program
from mncore_hdl.converter.timing import conversion_cycles, refresh_stall
from mncore_hdl.layout import (
    DTYPES,
    Layout,
    UnsupportedConversion,
    conversion,
    host_layout,
    native_layout,
    to_device,
)
from mncore_hdl.layout.random_layouts import random_layout, random_shape

SEED = 20261129


def _pairs(seed: int, count: int):
    rng = random.Random(seed)
    while count:
        dtype = rng.choice(sorted(DTYPES))
        shape = random_shape(rng)
        a, b = random_layout(rng, shape, dtype), random_layout(rng, shape, dtype)
        try:
            desc = conversion(a, b)
        except UnsupportedConversion:
            continue
        count -= 1
        yield rng, a, b, desc


@pytest.mark.parametrize("buffer_lw", [64, 2048])
def test_program_matches_golden(buffer_lw):
    """The hardware's algorithm, run in Python, equals ``descriptor.execute`` (small buffers
    force many blocks and split loops)."""
    for i, (_rng, a, b, desc) in enumerate(_pairs(SEED + buffer_lw, 150)):
        try:
            prog = compile_program(desc, MNCORE2_SIM, buffer_lw)
        except ProgramError:
            continue
        tensor = torch.randn(a.shape, generator=torch.Generator().manual_seed(i))
        src = to_device(tensor.to(getattr(torch, a.dtype)), a)
        got = simulate_program(prog, src)
        assert np.array_equal(got, desc.execute(src)), \
            f"case {i} (seed {SEED + buffer_lw}): {a} -> {b}"
        assert prog.block_read_lw <= buffer_lw // 2


def test_registers_cover_program():
    desc = conversion(host_layout((64, 64)), native_layout((64, 64), config=MNCORE2_SIM))
    prog = compile_program(desc, MNCORE2_SIM)
    regs = registers(prog, 1, 0x100, 0, 0x2000)
    assert regs[Reg.SRC_GROUP] == 1 and regs[Reg.DST_ADDR] == 0x2000
    assert regs[Reg.ELEM_BITS] == 32 and regs[Reg.N_OUTER] == len(prog.outer)
    assert all(0 <= v < 1 << 32 for v in regs.values())


def test_too_many_axes():
    layout = Layout.parse("(2,2,2,2,2)/((2:16),(2:8),(2:4),(2:2),(2:1))")
    with pytest.raises(ProgramError, match="at most 4 axes"):
        compile_program(conversion(layout, layout), MNCORE2_SIM)


def test_compile_type_errors():
    desc = conversion(host_layout((8, 8)), host_layout((8, 8)))
    with pytest.raises(TypeError, match="Descriptor must be a ConversionDescriptor"):
        compile_program("x", MNCORE2_SIM)
    with pytest.raises(TypeError, match="Config must be an ArchConfig"):
        compile_program(desc, None)
    with pytest.raises(TypeError, match="Config must be an ArchConfig"):
        conversion_cycles(None, desc)
    with pytest.raises(TypeError, match="Descriptor must be a ConversionDescriptor"):
        conversion_cycles(MNCORE2_SIM, None)


def test_timing_model_scales_with_traffic():
    small = conversion(host_layout((32, 32)), native_layout((32, 32), config=MNCORE2_SIM))
    large = conversion(host_layout((128, 128)), native_layout((128, 128), config=MNCORE2_SIM))
    c_small = conversion_cycles(MNCORE2_SIM, small)
    c_large = conversion_cycles(MNCORE2_SIM, large)
    assert small.read_lw <= c_small < 4 * (small.read_lw + small.write_lw)
    assert 10 < c_large / c_small < 20


def _bench_pair(name: str, kib: int):
    """The layouts of one ``bench/bench_converter.py`` row (fp32 unless bf16 in the name)."""
    n = kib * 1024 // 4
    r = 2 ** ((n.bit_length() - 1) // 2)
    c = n // r
    if name == "host->native fp32":
        return host_layout((r, c), "float32"), native_layout((r, c), "float32", MNCORE2_SIM)
    if name == "native->host bf16":
        return (native_layout((r, 2 * c), "bfloat16", MNCORE2_SIM),
                host_layout((r, 2 * c), "bfloat16"))
    if name == "native->host fp32 shared G0":
        return (native_layout((kib * 4, 64), "float32", MNCORE2_SIM),
                host_layout((kib * 4, 64), "float32"))
    if name == "native->host fp32 odd 33x65 shared G0":  # fixed shape, kib unused
        return (native_layout((33, 65), "float32", MNCORE2_SIM),
                host_layout((33, 65), "float32"))
    if name == "transpose fp32":
        return (host_layout((r, c), "float32"),
                Layout.parse(f"({r},{c})/(({r // 2}:1, 2_W:1), ({c}:{r // 2}))", "float32"))
    return (Layout.parse(f"({r},{c})/(({r // 4}:{c // 2}, 4_G:1), ({c // 2}:1, 2_W:1))"),
            Layout.parse(f"({r},{c})/((4_G:1, {r // 4}:{c // 2}), ({c // 2}:1, 2_W:1))"))


@pytest.mark.parametrize("name,kib,rtl,refreshes", [
    # RTL busy cycles of bench/bench_converter.py's full run on Verilator, and the refreshes
    # each conversion met there (a short run meets one or none: the model is compared at
    # those); host->native and the group redistribution run split, one engine per
    # destination Group; the others on one engine, whose writer's Group holds its reads
    ("host->native fp32", 4, 674, 0), ("native->host bf16", 4, 692, 0),
    ("transpose fp32", 4, 1073, 0), ("group redistribution", 4, 420, 1),
    ("native->host bf16", 16, 2697, 1), ("transpose fp32", 16, 4301, 1),
    ("group redistribution", 16, 1179, 1), ("native->host bf16", 64, 10794, 3),
    ("group redistribution", 64, 4397, 2), ("host->native fp32", 256, 44700, 15),
    ("transpose fp32", 256, 70317, 24), ("group redistribution", 1024, 69391, 24),
    ("transpose fp32", 1024, 281864, 96),
    # every block reads Group 0 while the writer streams into it (those reads wait for it)
    ("native->host fp32 shared G0", 16, 2697, 1), ("native->host fp32 shared G0", 64, 10660, 3),
    ("native->host fp32 shared G0", 256, 42865, 14),
    ("native->host fp32 shared G0", 1024, 171910, 59),
    # padded odd shape (--pairs odd): the last row-tile block is nearly all padding, yet its
    # gather walks every position
    ("native->host fp32 odd 33x65 shared G0", 18, 2806, 0),
])
def test_timing_model_matches_rtl_bench(name, kib, rtl, refreshes):
    a, b = _bench_pair(name, kib)  # both at Group 0, as the bench places them
    modeled = conversion_cycles(MNCORE2_SIM, conversion(a, b), refreshes=refreshes)
    assert abs(modeled / rtl - 1) < 0.05, (name, kib, modeled, rtl)


def test_timing_model_charges_refresh_as_asked():
    a, b = _bench_pair("transpose fp32", 64)
    desc = conversion(a, b)
    none, one = (conversion_cycles(MNCORE2_SIM, desc, refreshes=k) for k in (0, 1))
    assert one - none == refresh_stall(MNCORE2_SIM)
    # the expected share: one refresh stall every tREFI of the run
    share = conversion_cycles(MNCORE2_SIM, desc)
    assert share == pytest.approx(none / (1 - refresh_stall(MNCORE2_SIM)
                                          / MNCORE2_SIM.timing.trefi), abs=1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="Refreshes must be None or a non-negative"):
            conversion_cycles(MNCORE2_SIM, desc, refreshes=bad)


def test_timing_model_one_group_bus_is_serial():
    # A transpose inside one Group reads and writes on that Group's single data bus.
    a, b = _bench_pair("transpose fp32", 64)
    desc = conversion(a, b)
    assert conversion_cycles(MNCORE2_SIM, desc) > desc.read_lw + desc.write_lw
    # host -> native writes other Groups than it reads: reads and writes overlap.
    a, b = _bench_pair("host->native fp32", 64)
    desc = conversion(a, b)
    assert conversion_cycles(MNCORE2_SIM, desc) < 0.8 * (desc.read_lw + desc.write_lw)
