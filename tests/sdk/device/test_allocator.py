"""The allocator: multi-Group buffers at one address, its errors, and its running Group usage
against the live buffers' extents."""

from __future__ import annotations

import itertools
import random

import pytest
from mlsdk.device.allocator import ALIGN_LW, Allocator
from mlsdk.errors import DeviceMemoryError


def test_allocator_places_multi_group_buffers_at_one_address():
    alloc = Allocator(groups=4, lw_per_group=1024)
    a = alloc.allocate(1, 100)
    b = alloc.allocate(4, 10)
    assert b.group == 0 and b.groups == 4
    assert all(alloc.used_lw(g) >= 16 for g in range(4))
    c = alloc.allocate(1, 900)
    assert c.group != a.group
    alloc.free(a)
    with pytest.raises(ValueError, match="not allocated"):
        alloc.free(a)
    with pytest.raises(DeviceMemoryError, match="spanning 5 Groups"):
        alloc.allocate(5, 1)
    with pytest.raises(DeviceMemoryError, match="exhausted"):
        alloc.allocate(4, 1000)


def test_running_group_usage_matches_the_ranges_in_use():
    rng = random.Random(1234)
    alloc = Allocator(4, 1 << 16)
    live = []
    for step in range(400):
        if live and rng.random() < 0.45:
            alloc.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(alloc.allocate(rng.randint(1, 4), rng.randint(1, 900)))
        assert set(alloc.live) == {b.id for b in live}
        for g in range(4):
            # Each live buffer holds its LWs, rounded up to ALIGN_LW, in every Group it spans.
            expected = sum(-(-b.lw_per_group // ALIGN_LW) * ALIGN_LW for b in live
                           if b.group <= g < b.group + b.groups)
            assert alloc.used_lw(g) == expected, f"step {step}, Group {g} (seed 1234)"
    assert all(b.address % ALIGN_LW == 0 for b in live)



def test_first_fit_is_the_lowest_window_free_in_every_group():
    # first_fit jumps its window past the ranges it meets (bisections); it must give what a
    # scan of every LW gives: the lowest address whose window is free in all the Groups.
    rng = random.Random(41)
    alloc = Allocator(4, 4096)
    live = []
    for step in range(300):
        if live and rng.random() < 0.4:
            alloc.free(live.pop(rng.randrange(len(live))))
        else:
            try:
                live.append(alloc.allocate(rng.randint(1, 4), rng.randint(1, 300)))
            except DeviceMemoryError:
                pass
        first, groups = rng.randrange(4), rng.randint(1, 4)
        span, size = range(first, min(4, first + groups)), rng.randint(1, 64) * ALIGN_LW
        taken = [0] * 4096
        for b in live:
            if b.group <= span[-1] and span[0] < b.group + b.groups:
                extent = -(-b.lw_per_group // ALIGN_LW) * ALIGN_LW
                taken[b.address:b.address + extent] = [1] * extent
        held = list(itertools.accumulate(taken, initial=0))  # held[a]: LWs taken below a
        expected = next((a for a in range(4096 - size + 1) if held[a + size] == held[a]),
                        None)
        assert alloc.first_fit(span, size) == expected, f"step {step} (seed 41)"


def test_a_remembered_place_is_where_a_search_puts_the_buffer():
    # Places are remembered by the ranges in use (a number, given back when the last buffer
    # allocated is freed): over random allocations and frees, freeing the last one often (a
    # call's output, freed before the next call), every buffer goes where a search puts it.
    rng = random.Random(77)
    remembering, searching = Allocator(4, 4096), Allocator(4, 4096, remember_places=False)
    live: list[tuple] = []
    hits = 0
    again = None
    for step in range(600):
        roll = rng.random()
        if live and roll < 0.35:  # the last one allocated, as a call's output
            pair = live.pop()
        elif live and roll < 0.5:
            pair = live.pop(rng.randrange(len(live)))
        else:
            pair = None
        if pair is not None:
            remembering.free(pair[0])
            searching.free(pair[1])
            again = (pair[0].groups, pair[0].lw_per_group)
            continue
        if again is not None and rng.random() < 0.7:  # the next call's output, alike
            groups, size = again
        else:
            groups, size = rng.randint(1, 4), rng.choice([8, 16, 40, 300])
        hits += remembering.remembers(groups, size)
        assert not searching.remembers(groups, size)
        got = []
        for alloc in (remembering, searching):
            try:
                got.append(alloc.allocate(groups, size))
            except DeviceMemoryError:
                got.append(None)
        a, b = got
        assert (a is None) == (b is None), f"step {step} (seed 77)"
        if a is not None:
            assert (a.group, a.address) == (b.group, b.address), f"step {step} (seed 77)"
            live.append((a, b))
    assert hits > 20, "places were rarely remembered: the test does not test what it says"
