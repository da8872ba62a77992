"""pytest launchers of the memory controller benches (sim/tb_memctrl.py) on Icarus."""

from __future__ import annotations

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.memctrl import PORTS as PATHS
from mncore_hdl.testing.runner import BUILD_ROOT, require_simulator, run_cocotb, test_seed

#: The benches' configuration: the real timing and geometry, a smaller window to build fast.
CONFIG = MNCORE2_SIM.replace(sim_window_lw=1 << 14)
#: The same with the reordering scheduler.
CONFIG_FR = CONFIG.replace(scheduler="fr_fcfs", scheduler_window=12, scheduler_starvation_cap=8)
PORTS = len(PATHS)  # host, compute, converter


def _run(testcase: str, name: str | None = None, config=CONFIG, **env: str) -> None:
    require_simulator()
    from mncore_hdl.tooling.verilog import export_memctrl

    verilog = export_memctrl(config, PORTS, build_dir=BUILD_ROOT / "verilog")
    env["MC_META"] = str(verilog.with_suffix(".json"))
    name = name or f"memctrl_{testcase}"
    run_cocotb(verilog, "memctrl", "tb_memctrl", testcase, seed=test_seed(name),
               test_name=name, extra_env=env)


@pytest.mark.parametrize("testcase", ["smoke", "ordering_strobes_rows", "latency",
                                      "out_of_range", "fairness"])
def test_directed(testcase):
    _run(testcase)


@pytest.mark.parametrize("idle,bp", [(0.0, 0.0), (0.3, 0.5)], ids=["eager", "throttled"])
def test_random_traffic(idle, bp):
    _run("random_traffic", f"memctrl_random_traffic_{'eager' if idle == 0 else 'throttled'}",
         MC_IDLE=str(idle), MC_BP=str(bp))


def test_refresh_interval():
    _run("refresh_interval")


def test_stream_vs_model():
    _run("stream_vs_model")


@pytest.mark.parametrize("config", [CONFIG, CONFIG_FR], ids=["in_order", "fr_fcfs"])
def test_random_traffic_one_port(config):
    _run("random_traffic", f"memctrl_random_traffic_1port_{config.scheduler}", config,
         MC_ACTIVE_PORTS="1")


# -- the reordering scheduler: the same checks (fairness is round-robin's, not FR-FCFS's) ------

@pytest.mark.parametrize("testcase", ["smoke", "ordering_strobes_rows", "latency",
                                      "out_of_range", "refresh_interval"])
def test_fr_fcfs_directed(testcase):
    _run(testcase, f"memctrl_fr_{testcase}", CONFIG_FR)


@pytest.mark.parametrize("idle,bp", [(0.0, 0.0), (0.3, 0.5)], ids=["eager", "throttled"])
def test_fr_fcfs_random_traffic(idle, bp):
    _run("random_traffic", f"memctrl_fr_random_traffic_{'eager' if idle == 0 else 'throttled'}",
         CONFIG_FR, MC_IDLE=str(idle), MC_BP=str(bp))
