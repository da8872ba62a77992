"""Functional coverage is sampled: the directed coverage benches (sim/tb_coverage.py) run with
``MNCORE_COVERAGE`` on ($SIM, Icarus by default) and must hit the coverpoints they aim at.

Under ``bench/coverage.py`` (``MNCORE_COVERAGE`` already set) they write where it asks, so
their stimulus counts in the merged report.
"""

from __future__ import annotations

import json
import os

import pytest
from mncore_hdl.contracts.converter import MAX_LOOPS
from mncore_hdl.contracts.cosim import BACKING_STORE
from mncore_hdl.contracts.memctrl import PORTS
from mncore_hdl.testing.runner import BUILD_ROOT, require_simulator, run_cocotb, test_seed
from mncore_hdl.tooling.coverage import COVERAGE_ENV, functional_path, merge_functional
from test_converter import CONFIG as CONVERTER_CONFIG
from test_converter import harness_verilog
from test_memctrl import CONFIG as MEMCTRL_CONFIG
from test_memctrl import CONFIG_FR as MEMCTRL_CONFIG_FR


@pytest.fixture
def coverage_dir(tmp_path, monkeypatch):
    """``$MNCORE_COVERAGE`` when a coverage run set it, else a fresh folder."""
    folder = os.environ.get(COVERAGE_ENV) or str(tmp_path / "coverage")
    monkeypatch.setenv(COVERAGE_ENV, folder)
    return folder


def _hits(folder: str, test_name: str):
    path = functional_path(folder, test_name)
    if not path.exists():
        pytest.fail(f"{test_name} wrote no functional coverage at {path}: sampling is broken")
    return merge_functional([path])


def _missing(items, name: str, bins=None) -> list[str]:
    item = items[name]
    unreached = item.unreached
    return [f"{name} {b}" for b in unreached if bins is None or b in bins]


#: The command kinds this bench's stimulus makes refresh fall due after, per scheduler. The
#: reordering ``fr_fcfs`` frontend prepares rows ahead (a PRE issues while other banks' column
#: commands run, so the last command before refresh falls due is a column command or an ACT):
#: with it this stimulus never leaves a PRE last; the ``in_order`` run reaches that bin, and
#: ``bench/coverage.py`` merges both.
REFRESH_AFTER_REACHED = {"in_order": ("ACT", "PRE", "RD", "WR"), "fr_fcfs": ("ACT", "RD", "WR")}


@pytest.mark.parametrize("config", [MEMCTRL_CONFIG, MEMCTRL_CONFIG_FR],
                         ids=["in_order", "fr_fcfs"])
def test_memctrl_coverage_sampled(coverage_dir, config):
    require_simulator()
    from mncore_hdl.tooling.verilog import export_memctrl

    name = f"coverage_memctrl_window_and_refresh_{config.scheduler}"
    verilog = export_memctrl(config, len(PORTS), build_dir=BUILD_ROOT / "verilog")
    run_cocotb(verilog, "memctrl", "tb_coverage", "memctrl_window_and_refresh",
               seed=test_seed(name), test_name=name,
               extra_env={"MC_META": str(verilog.with_suffix(".json"))})
    items = _hits(coverage_dir, name)
    missing = (_missing(items, "memctrl.request.dir_x_window")
               + _missing(items, "memctrl.column.kind_x_state_x_port")
               + _missing(items, "memctrl.refresh.after",
                          bins=REFRESH_AFTER_REACHED[config.scheduler]))
    assert not missing, f"coverpoints the bench must hit, not hit: {missing}"


def test_converter_coverage_sampled(coverage_dir):
    require_simulator()
    name = "coverage_converter_loop_depths"
    seed = test_seed(name)
    env = {"CONV_SEED": str(seed), "CONV_MEM_PATH": BACKING_STORE["harness"],
           "CONV_CONFIG": json.dumps(CONVERTER_CONFIG.to_dict())}
    run_cocotb(harness_verilog(), "conv_harness", "tb_coverage", "converter_loop_depths",
               seed=seed, test_name=name, extra_env=env)
    items = _hits(coverage_dir, name)
    missing = [*(m for t in ("outer", "read", "gather")
                 for m in _missing(items, f"converter.depth.{t}")),
               *_missing(items, "converter.elem_bits"),
               *_missing(items, "converter.error", {"NONE"})]
    assert not missing, f"coverpoints the bench must hit, not hit: {missing}"
    assert len(items["converter.depth.read"].bins) == MAX_LOOPS + 1


def test_verilator_line_coverage_maps_to_amaranth(coverage_dir, monkeypatch):
    """A Verilator ``--coverage`` build of one timing counter: its counts land in the test's
    ``.dat`` and map back to ``memctrl/timers.py`` lines, which are hit (about a CPU-minute:
    the model is tiny, Verilator's runtime is most of the build)."""
    from mncore_hdl.memctrl.timers import TimingCounter
    from mncore_hdl.testing.runner import require_verilator
    from mncore_hdl.tooling.coverage import line_data_path, read_dat, src_map, summarise_points
    from mncore_hdl.tooling.verilog import export_verilog

    monkeypatch.setenv("SIM", "verilator")
    require_verilator()
    verilog = export_verilog(lambda: TimingCounter(5), "timing_counter", {"cycles": 5},
                             BUILD_ROOT / "verilog", design=TimingCounter)
    assert 'src = "' in verilog.read_text(), "a coverage export keeps Amaranth's src attributes"
    name = "coverage_timing_counter"
    run_cocotb(verilog, "timing_counter", "tb_coverage", "timing_counter", seed=1,
               test_name=name)
    dat = line_data_path(coverage_dir, name)
    points = read_dat(dat)
    figures = summarise_points(points, {str(verilog.resolve()): src_map(verilog.read_text())})
    timers = figures.get("hdl/mncore_hdl/memctrl/timers.py")
    assert timers is not None, f"no point of {dat} maps to memctrl/timers.py: {sorted(figures)}"
    assert timers.line_pct == 100.0 and timers.toggles_hit > 0, timers
