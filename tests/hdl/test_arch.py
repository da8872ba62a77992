"""The architecture config: validation, derived geometry, serialization."""

from __future__ import annotations

import dataclasses

import pytest
from mncore_hdl.arch import MNCORE2, MNCORE2_SIM, SCHEDULERS, TIMING_PRESETS, ArchConfig, DramTiming


def test_defaults_describe_mncore2():
    assert MNCORE2.groups == 4
    assert MNCORE2.l2b_per_group * MNCORE2.l1b_per_l2b * MNCORE2.mab_per_l1b == 256
    assert MNCORE2.pes == 4 * 2 * 8 * 16 * 4
    assert MNCORE2.lw_bytes == 8
    assert MNCORE2.dram_lw_per_group == (4 << 30) // 8
    assert MNCORE2_SIM.dram_lw_per_group == MNCORE2.sim_window_lw


def test_split_address_walks_a_row_then_the_next_bank():
    cfg = MNCORE2
    assert cfg.split_address(0) == (0, 0, 0)
    assert cfg.split_address(cfg.row_lw - 1) == (0, 0, cfg.row_lw - 1)
    assert cfg.split_address(cfg.row_lw) == (1, 0, 0)
    assert cfg.split_address(cfg.row_lw * cfg.banks) == (0, 1, 0)


def test_round_trip_through_dict():
    cfg = MNCORE2.replace(groups=2, timing=DramTiming(cl=9))
    assert ArchConfig.from_dict(cfg.to_dict()) == cfg
    assert ArchConfig.from_dict(__import__("json").loads(cfg.to_json())) == cfg


@pytest.mark.parametrize("changes, error, message", [
    ({"groups": 0}, ValueError, "ArchConfig.groups must be a positive integer, not 0"),
    ({"groups": 2.5}, TypeError, "ArchConfig.groups must be an integer, not 2.5"),
    ({"banks": 12}, ValueError, "ArchConfig.banks must be a power of two, not 12"),
    ({"lw_bits": 32}, ValueError, "ArchConfig.lw_bits must be 64"),
    ({"dram_bytes_per_group": 100}, ValueError, "multiple of the LW size"),
    ({"sim_window_lw": 1 << 40}, ValueError, "cannot exceed the DRAM size"),
    ({"row_lw": 4}, ValueError, "multiple of the burst length"),
    ({"scheduler": "fifo"}, ValueError,
     "ArchConfig.scheduler must be one of in_order, fr_fcfs, not 'fifo'"),
    ({"scheduler_window": 2}, ValueError,
     "ArchConfig.scheduler_window must be between 4 and 32, not 2"),
    ({"scheduler_window": 33}, ValueError,
     "ArchConfig.scheduler_window must be between 4 and 32, not 33"),
    ({"scheduler_window": "8"}, TypeError, "ArchConfig.scheduler_window must be an integer"),
    ({"scheduler_starvation_cap": 0}, ValueError,
     "ArchConfig.scheduler_starvation_cap must be a positive integer, not 0"),
])
def test_invalid_config_is_rejected(changes, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        MNCORE2.replace(**changes)


def test_invalid_timing_is_rejected():
    with pytest.raises(ValueError, match="DramTiming.cl must be a positive integer, not -3"):
        DramTiming(cl=-3)
    with pytest.raises(ValueError, match="trfc .* must be shorter than trefi"):
        DramTiming(trfc=5000)
    with pytest.raises(ValueError, match="burst_length must be a power of two"):
        DramTiming(burst_length=6)
    with pytest.raises(ValueError, match="DramTiming.twtr must be a non-negative integer, not -1"):
        DramTiming(twtr=-1)
    with pytest.raises(ValueError, match="DramTiming.tfaw must be a positive integer, not 0"):
        DramTiming(tfaw=0)


def test_timing_presets():
    assert TIMING_PRESETS["mncore2"] == MNCORE2.timing == MNCORE2_SIM.timing
    assert set(TIMING_PRESETS) == {"mncore2", "ddr4_3200", "ddr4_3200_bus", "basic"}
    ddr4 = TIMING_PRESETS["ddr4_3200"]
    # JEDEC DDR4-3200AA at 1.333 ns a cycle, rounded up
    assert (ddr4.cl, ddr4.trcd, ddr4.trp, ddr4.tras) == (11, 11, 11, 24)
    assert (ddr4.trrd, ddr4.tfaw, ddr4.twtr, ddr4.trtp, ddr4.tccd) == (5, 23, 6, 6, 4)
    basic = TIMING_PRESETS["basic"]
    assert (basic.twtr, basic.trtw, basic.trrd, basic.tfaw) == (0, 0, 1, 1)
    for name, t in TIMING_PRESETS.items():
        cfg = MNCORE2.replace(timing=t)
        assert ArchConfig.from_dict(cfg.to_dict()) == cfg, name


def test_scheduler_fields():
    assert SCHEDULERS == ("in_order", "fr_fcfs")
    assert MNCORE2.scheduler == "in_order"
    cfg = MNCORE2.replace(scheduler="fr_fcfs", scheduler_window=16, scheduler_starvation_cap=8)
    assert ArchConfig.from_dict(cfg.to_dict()) == cfg


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        MNCORE2.groups = 8  # type: ignore[misc]
