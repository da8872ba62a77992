"""The converter timing model's fast replay against the block-by-block replay it replaces.

``replay_cycles`` takes its traffic from numpy (``block_traffic_fast``) and jumps over repeating
periods of the steady state; both must give exactly the cycles of the reference replay.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mncore_hdl.arch import ArchConfig
from mncore_hdl.converter.program import ProgramError, compile_program
from mncore_hdl.converter.timing import block_traffic, block_traffic_fast, replay_cycles
from mncore_hdl.layout import (
    DTYPES,
    LayoutError,
    conversion,
    host_layout,
    native_layout,
)
from mncore_hdl.layout.random_layouts import random_layout, random_shape

CONFIG = ArchConfig()


def _check(prog, src_group: int, dst_group: int) -> None:
    distinct, ids = block_traffic_fast(prog, src_group, dst_group)
    assert [distinct[i] for i in ids.tolist()] == block_traffic(prog, src_group, dst_group)
    fast = replay_cycles(CONFIG, prog, src_group, dst_group)
    reference = replay_cycles(CONFIG, prog, src_group, dst_group, reference=True)
    assert fast == reference


@pytest.mark.parametrize("shape", [(33, 65), (1024, 256), (4096, 256), (3000, 70), (130, 130)])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("groups", [(0, 0), (1, 2), (3, 0)])
def test_native_host_pairs_exact(shape, forward, groups):
    src, dst = native_layout(shape), host_layout(shape)
    if not forward:
        src, dst = dst, src
    _check(compile_program(conversion(src, dst), CONFIG), *groups)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(sorted(DTYPES)),
       groups=st.integers(0, 3))
@pytest.mark.parametrize("max_numel", [4096, 1 << 17])
def test_random_conversions_exact(seed, dtype, groups, max_numel):
    rng = random.Random(seed)
    shape = random_shape(rng, max_numel=max_numel)
    try:
        src, dst = random_layout(rng, shape, dtype), random_layout(rng, shape, dtype)
    except RuntimeError:
        assume(False)
    try:
        prog = compile_program(conversion(src, dst), CONFIG)
    except (LayoutError, ProgramError):
        return
    print(f"seed={seed} {src} -> {dst}")
    _check(prog, groups, 3 - groups)
