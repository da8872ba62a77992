"""A Convert's ``converter`` bytes on the functional model: the converter program's beats.

The figure every backend reports is the LWs the layout converter moves (beats read plus beats
written) times the LW's bytes; the RTL backends read it off the converter's counters
(``bench/soak.py``, run by ``sim/sdk/test_soak_icarus.py``, compares the two per call), the
functional model counts it from the program. Here the functional figure is checked against
the program walked step by step the way the read engine and the writer run it.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mlsdk import Context, MNDevice
from mlsdk.device.commands import Convert
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.converter.program import (
    ConverterProgram,
    ProgramError,
    compile_program,
    engine_bases,
    walk_table,
)
from mncore_hdl.converter.timing import block_traffic, converter_beats
from mncore_hdl.layout import (
    DTYPES,
    LayoutError,
    conversion,
    host_layout,
    native_layout,
    to_device,
)
from mncore_hdl.layout.random_layouts import random_layout, random_shape

CONFIG = MNCORE2_SIM


def _walked_beats(prog: ConverterProgram) -> tuple[int, int]:
    """The program's reads and writes, step by step: every read-table step of every block is
    one burst of ``burst`` LWs, clipped at the end of the source Group's footprint and skipped
    when it starts outside it (each engine's blocks from its base); the writer writes each LW
    of the destination footprint once."""
    read = 0
    for base in engine_bases(prog):
        for ob in walk_table(prog.outer, 5 + len(prog.dims)):
            for rd in walk_table(prog.read, 2):
                g, a = base[0] + ob[0] + rd[0], base[1] + ob[1] + rd[1]
                if 0 <= g < prog.src_groups and 0 <= a < prog.src_lw_per_group:
                    read += min(prog.burst, prog.src_lw_per_group - a)
    return read, prog.dst_groups * prog.dst_lw_per_group


def _device_bytes(src, dst, dtype: str) -> int:
    """The ``converter`` bytes the functional model reports for one Convert ``src -> dst``."""
    import torch

    with Context(MNDevice("mncore2:auto", config=CONFIG)) as ctx:
        dev = ctx.device
        src_buf, dst_buf = dev.allocate(src), dev.allocate(dst)
        tensor = torch.zeros(src.shape, dtype=getattr(torch, dtype))
        dev.poke(src_buf, to_device(tensor, src))
        done = dev.execute(Convert(src_buf, str(src), dst_buf, str(dst),
                                   conversion(src, dst), dtype))
        return done.bytes["converter"]


def _check(src, dst, dtype: str) -> None:
    prog = compile_program(conversion(src, dst), CONFIG)
    read, written = _walked_beats(prog)
    assert converter_beats(prog) == (read, written)
    # the timing model's reference traffic moves the same reads
    assert sum(lw for k in range(prog.engines) for b in block_traffic(prog, engine=k)
               for _, lw in b.reads) == read
    assert _device_bytes(src, dst, dtype) == (read + written) * CONFIG.lw_bytes


@pytest.mark.parametrize("shape", [(33, 65), (17, 130), (64, 64), (3, 5, 7)])
@pytest.mark.parametrize("forward", [True, False])
def test_native_host_pairs(shape, forward):
    src, dst = native_layout(shape, "float32", CONFIG), host_layout(shape, "float32")
    if not forward:
        src, dst = dst, src
    _check(src, dst, "float32")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(sorted(DTYPES)))
def test_random_layout_pairs(seed, dtype):
    rng = random.Random(seed)
    shape = random_shape(rng, max_numel=4096)
    try:
        src, dst = random_layout(rng, shape, dtype), random_layout(rng, shape, dtype)
        compile_program(conversion(src, dst), CONFIG)
    except (RuntimeError, LayoutError, ProgramError):
        assume(False)
    _check(src, dst, dtype)
