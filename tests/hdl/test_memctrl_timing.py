"""The analytic timing model (mncore_hdl.memctrl.timing): formulas, validation, no Amaranth."""

import pytest
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM, TIMING_PRESETS
from mncore_hdl.memctrl import timing
from mncore_hdl.testing.hdl_checks import imports_without_amaranth


def test_imports_without_amaranth():
    imports_without_amaranth("mncore_hdl.memctrl.timing", "mncore_hdl.converter.timing")


def test_read_latency_formulas():
    t = MNCORE2_SIM.timing
    hit = timing.read_latency(MNCORE2_SIM, "hit")
    assert hit == timing.REQUEST_TO_COMMAND + t.cl + timing.READ_RETURN
    assert timing.read_latency(MNCORE2_SIM, "miss") == \
        timing.REQUEST_TO_PREPARE + t.trcd + t.cl + timing.READ_RETURN
    assert timing.read_latency(MNCORE2_SIM, "conflict") - \
        timing.read_latency(MNCORE2_SIM, "miss") == t.trp


def test_stream_is_near_peak_and_grows_linearly():
    for write in (False, True):
        c = timing.stream_cycles(MNCORE2, 1 << 16, write=write)
        assert 0.9 < (1 << 16) / c < 1.0
        assert timing.stream_cycles(MNCORE2, 1 << 17, write=write) > c
    assert timing.stream_cycles(MNCORE2, 0, write=False) == 0
    seq = timing.stream_cycles(MNCORE2, 8192, write=False)
    assert timing.stream_cycles(MNCORE2, 8192, write=False, sequential=False) > seq


def test_mixed_is_about_the_sum():
    m = timing.mixed_cycles(MNCORE2, 4096, 4096)
    assert timing.stream_cycles(MNCORE2, 8192, write=False) * 0.95 < m
    assert m < timing.stream_cycles(MNCORE2, 8192, write=True) * 1.05
    assert timing.mixed_cycles(MNCORE2, 0, 256) == timing.stream_cycles(MNCORE2, 256, write=True)


def test_validation():
    with pytest.raises(TypeError, match=r"^Config must be an ArchConfig, not None$"):
        timing.stream_cycles(None, 8, write=True)
    with pytest.raises(ValueError, match=r"^LW count must be a non-negative integer, not -1$"):
        timing.stream_cycles(MNCORE2, -1, write=True)
    with pytest.raises(ValueError,
                       match=r"^Write LW count must be a non-negative integer, not 1.5$"):
        timing.mixed_cycles(MNCORE2, 1, 1.5)
    with pytest.raises(ValueError, match=r"^Latency kind must be 'hit', 'miss' or 'conflict', "
                                         r"not 'x'$"):
        timing.read_latency(MNCORE2, "x")


def test_copy_pays_the_turnarounds():
    t = MNCORE2.timing
    row = MNCORE2.row_lw
    # read, write, read, write: two read-to-write changes, one write-to-read
    assert timing.turnaround_cycles(MNCORE2, 2 * row, 2 * row) == 2 * t.trtw + t.twtr
    assert timing.turnaround_cycles(MNCORE2, row, 0) == 0
    basic = MNCORE2.replace(timing=TIMING_PRESETS["basic"])
    assert timing.mixed_cycles(MNCORE2, 4096, 4096) > timing.mixed_cycles(basic, 4096, 4096)
