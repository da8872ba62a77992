"""The functional model's DRAM store: lazily backed, views without copies, page snapshots."""

from __future__ import annotations

import numpy as np
import pytest
from mlsdk.device.dram import PAGE_LW, DramStore, GroupDram


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def test_untouched_groups_cost_no_memory():
    pytest.importorskip("resource")
    before = _rss_kib()
    store = DramStore(4, 1 << 29)  # 4 Groups of 4 GiB modeled
    store.write(2, 0x1000, np.arange(1 << 16, dtype=np.uint64)[None, :])  # 512 KiB in one
    grown = _rss_kib() - before
    assert grown < 16 << 10, f"RSS grew by {grown} KiB for 512 KiB written into 16 GiB"
    assert store.view(2, 1, 0x1000 + 5, 1)[0, 0] == 5
    assert not store.view(0, 1, 0x1000, 16).any()


def test_reads_are_read_only_views_and_writes_land():
    store = DramStore(2, 1 << 16)
    image = np.arange(2 * 100, dtype=np.uint64).reshape(2, 100)
    store.write(0, 40, image)
    view = store.read(0, 2, 40, 100)
    assert np.array_equal(view, image)
    with pytest.raises(ValueError):
        view[0, 0] = 1
    store.write(1, 40, np.zeros((1, 1), dtype=np.uint64))
    assert view[1, 0] == 0  # a view: it sees later writes


def test_snapshot_lists_non_zero_pages_of_one_group():
    store = DramStore(2, 4 * PAGE_LW)
    store.write(1, PAGE_LW + 3, np.ones((1, 2), dtype=np.uint64))
    store.write(1, 3 * PAGE_LW, np.zeros((1, 8), dtype=np.uint64))  # written, but zero
    snap = store.snapshot(1)
    assert list(snap) == [1]
    assert snap[1][3] == 1 and snap[1].sum() == 2
    assert store.snapshot(0) == {}


def test_group_dram_keeps_the_sparse_store_interface():
    dram = GroupDram(2 * PAGE_LW)
    dram.write(PAGE_LW - 1, np.array([7, 8], dtype=np.uint64))
    assert dram.read(PAGE_LW - 1, 2).tolist() == [7, 8]
    assert sorted(dram.snapshot()) == [0, 1]


@pytest.mark.parametrize(("group", "groups", "address", "count"),
                         [(0, 1, -1, 1), (0, 1, 60, 5), (1, 2, 0, 1), (-1, 1, 0, 1)])
def test_out_of_range_accesses_raise(group, groups, address, count):
    store = DramStore(2, 64)
    with pytest.raises(IndexError, match="outside"):
        store.view(group, groups, address, count)


def test_sizes_must_be_positive():
    with pytest.raises(ValueError, match="lw_per_group must be a positive integer, not 0"):
        DramStore(1, 0)
