"""The analytic timing model (mncore_hdl.memctrl.timing): formulas, validation, no Amaranth."""

import dataclasses

import pytest
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM, TIMING_PRESETS
from mncore_hdl.memctrl import timing
from mncore_hdl.memctrl.bound import Traffic, bound_cycles
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


FR_FCFS = MNCORE2_SIM.replace(scheduler="fr_fcfs", scheduler_window=16)


def test_random_traffic_between_the_bound_and_the_serial_miss():
    lw = 4096
    serial = timing.read_latency(MNCORE2_SIM, "conflict")  # every burst waits for its row
    for ports in (1, 3):
        for share in (1.0, 0.5):
            traffic = Traffic("random", 8, share)
            floor = bound_cycles(MNCORE2_SIM, traffic, lw * ports)
            in_order = timing.random_cycles(MNCORE2_SIM, lw * ports, ports=ports,
                                            read_share=share)
            fr = timing.random_cycles(FR_FCFS, lw * ports, ports=ports, read_share=share)
            assert floor < fr < in_order < lw * ports // 8 * serial
    assert timing.random_cycles(MNCORE2_SIM, 0) == 0


def test_random_gap_follows_the_rules():
    def gap(config, **kw):
        args = {"burst": 8, "ports": 1, "read_share": 1.0, "direction_changes": 0.0,
                "banks": 16, **kw}
        return timing.random_chunk_gap(config, **args)

    # in order, one port: two chunks in flight, each waiting for its row
    t = MNCORE2_SIM.timing
    assert gap(MNCORE2_SIM) >= (timing.REQUEST_TO_PREPARE + t.trp + t.trcd) / 2
    # reordering, more ports, more banks, fewer turnarounds: never slower
    assert gap(FR_FCFS) < gap(MNCORE2_SIM)
    assert gap(FR_FCFS, ports=3) < gap(FR_FCFS)
    assert gap(FR_FCFS, banks=4) > gap(FR_FCFS)
    assert gap(FR_FCFS, direction_changes=0.5) > gap(FR_FCFS)
    # the activate window binds once tFAW / 4 exceeds the burst
    slow_faw = FR_FCFS.replace(timing=dataclasses.replace(t, tfaw=64))
    assert gap(slow_faw, ports=3) >= 16


def test_random_validation():
    with pytest.raises(ValueError, match=r"^Burst must be an integer in 1\.\.8, not 16$"):
        timing.random_cycles(MNCORE2_SIM, 64, burst=16)
    with pytest.raises(ValueError, match=r"^Port count must be a positive integer, not 0$"):
        timing.random_cycles(MNCORE2_SIM, 64, ports=0)
    with pytest.raises(ValueError, match=r"^Read share must be in \[0, 1\], not 2$"):
        timing.random_cycles(MNCORE2_SIM, 64, read_share=2)
    with pytest.raises(ValueError, match=r"^Direction changes must be in \[0, 1\], not -1$"):
        timing.random_cycles(MNCORE2_SIM, 64, direction_changes=-1)
    with pytest.raises(ValueError, match=r"^Banks must be an integer in 1\.\.16, not 32$"):
        timing.random_cycles(MNCORE2_SIM, 64, banks=32)
    with pytest.raises(ValueError, match=r"^LW count must be a non-negative integer, not -8$"):
        timing.random_cycles(MNCORE2_SIM, -8)
