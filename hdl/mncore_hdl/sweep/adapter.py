"""The sweep's one seam to the memory system: configs, timing models, RTL bench, bounds, area.

Everything the sweep knows about ``mncore_hdl.arch`` presets and ``memctrl`` (its timing model
and traffic-generator bench top) is here, so that a change of those modules (a new scheduler,
new timing rules, a bound function) is adapted in this file alone; conversion points are in
``conversions.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import arch
from ..arch import ArchConfig, DramTiming
from .workload import Workload

__all__ = ["BASE_CONFIGS", "timing_presets", "preset_timing", "model_figures", "rtl_figures",
           "area_bits", "design_roots", "bound_efficiency", "RTL_PORTS"]

#: Named starting configurations of a spec's ``base_config``.
BASE_CONFIGS = {"MNCORE2_SIM": arch.MNCORE2_SIM, "MNCORE2": arch.MNCORE2}
#: Ports of the RTL bench top (a generator on each; a point drives ``workload.ports`` of them).
RTL_PORTS = 3
LW_BITS = arch.LW_BITS


def timing_presets() -> dict[str, DramTiming]:
    """``mncore_hdl.arch.TIMING_PRESETS`` when the kit has named timing presets, else ``{}``."""
    return dict(getattr(arch, "TIMING_PRESETS", {}))


def preset_timing(name: str) -> DramTiming:
    """The :class:`DramTiming` preset called ``name``; the error lists the known names."""
    presets = timing_presets()
    if name not in presets:
        known = ", ".join(sorted(presets)) or "none (this kit has no TIMING_PRESETS yet)"
        raise ValueError(f"Timing preset must be one of: {known}; not {name!r}")
    return presets[name]


#: The cocotb benches of the RTL points (``mncore_hdl.testing.runner.BENCHES``).
_BENCHES = "mncore_hdl.testing.cocotb_benches"


def design_roots(workload: Workload, backend: str) -> list[Any]:
    """What defines the design a point's figures depend on (their sources key the result): the
    model or the RTL top, and for an RTL point its cocotb bench."""
    if workload.kind == "convert":
        if backend == "model":
            return ["mncore_hdl.converter.timing", "mncore_hdl.sweep.conversions"]
        return ["mncore_hdl.top.system", "mncore_hdl.sweep.conversions",
                f"{_BENCHES}.tb_converter_bench"]
    if backend == "model":
        return ["mncore_hdl.memctrl.timing", __name__]
    return ["mncore_hdl.memctrl.trafficgen", __name__, f"{_BENCHES}.tb_memctrl_bench"]


def _burst(config: ArchConfig, w: Workload) -> int:
    if w.burst_lw:
        return w.burst_lw
    return config.timing.burst_length if w.pattern == "random" else config.row_lw


# -- memory controller: analytic model ---------------------------------------------------------

def _memctrl_model(config: ArchConfig, w: Workload) -> dict[str, Any]:
    from ..memctrl import timing

    total = w.lw * w.ports
    burst = _burst(config, w)
    if w.pattern == "random":
        if burst > config.timing.burst_length:
            raise ValueError(f"The memctrl timing model describes random bursts of at most "
                             f"the DRAM burst ({config.timing.burst_length} LW), not "
                             f"burst_lw={w.burst_lw}; run longer ones on an RTL backend")
        cycles = timing.random_cycles(config, total, burst=burst, ports=w.ports,
                                      read_share=float(w.read_share))
        return {"cycles": cycles, "beats": total, "efficiency": total / cycles}
    if burst != config.row_lw:
        raise ValueError(f"The memctrl timing model describes one-row bursts "
                         f"({config.row_lw} LW), not burst_lw={w.burst_lw}; "
                         "run other burst lengths on an RTL backend")
    if w.pattern == "mixed":
        reads = round(total * w.read_share)
        cycles = timing.mixed_cycles(config, reads, total - reads)
    else:
        cycles = timing.stream_cycles(config, total, write=w.pattern == "write")
    return {"cycles": cycles, "beats": total, "efficiency": total / cycles}


def _traffic(config: ArchConfig, w: Workload) -> Any:
    """The bound's description of a point's traffic (``memctrl.bound.Traffic``)."""
    from ..memctrl.bound import Traffic

    # a chunk is at most one DRAM burst, whatever the request length
    burst = min(_burst(config, w), config.timing.burst_length)
    if w.pattern == "random":
        return Traffic("random", burst, float(w.read_share))
    share = {"read": 1.0, "write": 0.0}.get(w.pattern, float(w.read_share))
    return Traffic("sequential", burst, share)


def bound_efficiency(config: ArchConfig, w: Workload) -> float | None:
    """The best data-bus efficiency any scheduler could reach for this traffic
    (``memctrl.bound.bound_cycles`` for the point's beats); None for a conversion point."""
    if w.kind != "memctrl":
        return None
    from ..memctrl.bound import bound_cycles

    beats = w.lw * w.ports
    return beats / bound_cycles(config, _traffic(config, w), beats)


def model_figures(config: ArchConfig, w: Workload) -> dict[str, Any]:
    """Figures of one point on the analytic timing models (milliseconds)."""
    if w.kind == "convert":
        from . import conversions

        return conversions.model_figures(config, w)
    figures = _memctrl_model(config, w)
    bound = bound_efficiency(config, w)
    if bound:
        figures["bound_ratio"] = figures["efficiency"] / bound
    return figures


# -- memory controller: RTL bench through cocotb -----------------------------------------------

def _port_base(config: ArchConfig, i: int) -> int:
    # Each port's region a quarter of the window apart, staggered by 5 banks (as bench_memctrl).
    return i * (config.sim_window_lw // 4 + 5 * config.row_lw)


def _generators(config: ArchConfig, w: Workload) -> list[dict[str, int]]:
    from ..memctrl.trafficgen import Mode

    blen = _burst(config, w)
    if blen > config.row_lw or w.lw % blen:
        raise ValueError(f"burst_lw must divide the LWs per port ({w.lw}) and be at most a row "
                         f"({config.row_lw}), not {blen}")
    if w.ports > RTL_PORTS:
        raise ValueError(f"The RTL bench has {RTL_PORTS} ports, not {w.ports}")
    if w.pattern == "mixed" and w.read_share != 0.5:
        raise ValueError("The RTL traffic generator alternates read and write bursts: "
                         f"read_share must be 0.5, not {w.read_share}")
    mode = {"read": Mode.READ, "write": Mode.WRITE, "mixed": Mode.MIXED,
            "random": Mode.RANDOM}[w.pattern]
    gens = []
    for i in range(w.ports):
        base = 0 if w.pattern == "random" else _port_base(config, i)
        base2 = base + w.lw // 2 + 8 * config.row_lw if w.pattern == "mixed" else 0
        gens.append({"mode": mode, "base": base, "base2": base2, "count": w.lw // blen,
                     "blen": blen})
    return gens


def _export_bench(config: ArchConfig, build_root: Path) -> Path:
    """The bench top's Verilog, cached by design and config."""
    from ..memctrl.trafficgen import BenchTop
    from .benches import export_once

    meta = {"component": "BenchTop", "ports": RTL_PORTS, "config": config.to_dict()}
    return export_once(lambda: BenchTop(config, RTL_PORTS), "memctrl_bench", meta, BenchTop,
                       build_root)


def rtl_figures(config: ArchConfig, w: Workload, simulator: str, name: str) -> dict[str, Any]:
    """Figures of one point on an RTL bench, on ``simulator`` (``icarus``/``verilator``).

    ``memctrl``: the bench top with a traffic generator on each port; ``convert``: the
    memory-system top (``conversions.rtl_figures``). ``name`` names the point's output folder
    below ``build/sim``; the Verilog and the compiled simulation are cached by design and config
    there, so points on one node share them.
    """
    from ..testing.runner import BUILD_ROOT
    from .benches import run_bench

    if w.kind == "convert":
        from . import conversions

        return conversions.rtl_figures(config, w, simulator, name)
    case = {"name": name, "ports": RTL_PORTS, "gens": _generators(config, w)}
    verilog = _export_bench(config, BUILD_ROOT)
    out = BUILD_ROOT / name / "results.json"
    env = {"MC_BENCH_CASES": json.dumps([case]), "MC_BENCH_OUT": str(out)}
    run_bench(verilog, "memctrl_bench", "tb_memctrl_bench", "run_cases", name, env, simulator)
    (result,) = json.loads(out.read_text())
    beats = w.lw * w.ports
    figures = {"cycles": result["cycles"], "beats": beats,
               "efficiency": beats / result["cycles"], "sim_wall_s": result["wall_s"]}
    bound = bound_efficiency(config, w)
    if bound:
        figures["bound_ratio"] = figures["efficiency"] / bound
    return figures


# -- area proxy ---------------------------------------------------------------------------------

def area_bits(config: ArchConfig, w: Workload) -> int:
    """Storage bits of what the point's design adds: a proxy for area.

    ``convert``: the converter's buffer. ``memctrl``: each used port's read and write FIFOs,
    plus the scheduler's window of queued requests when the config has one.
    """
    if w.kind == "convert":
        return w.buffer_lw * LW_BITS
    from ..contracts.memctrl import RequestFormat
    from ..memctrl.requester import read_fifo_depth, write_fifo_depth

    fifo = (read_fifo_depth(config) * (LW_BITS + 1)
            + write_fifo_depth(config) * (LW_BITS + config.lw_bytes))
    request = RequestFormat.of(config).bits
    window = int(getattr(config, "scheduler_window", 0) or 0)
    return w.ports * fifo + window * request
