"""The sweep's one seam to the memory system: configs, timing models, RTL bench, bounds, area.

Everything the sweep knows about ``mncore_hdl.arch`` presets, ``memctrl`` (its timing model and
traffic-generator bench top) and the converter's timing model is here, so that a change of those
modules (a new scheduler, new timing rules, a bound function) is adapted in this file alone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .. import arch
from ..arch import ArchConfig, DramTiming
from .workload import Workload

__all__ = ["BASE_CONFIGS", "timing_presets", "preset_timing", "model_figures", "rtl_figures",
           "area_bits", "design_roots", "bench_sources", "bound_efficiency", "RTL_PORTS"]

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


def design_roots(workload: Workload, backend: str) -> list[Any]:
    """What defines the design a point's figures depend on (their sources key the result)."""
    if backend == "model":
        model = "mncore_hdl.memctrl.timing" if workload.kind == "memctrl" \
            else "mncore_hdl.converter.timing"
        return [model, __name__]
    return ["mncore_hdl.memctrl.trafficgen", __name__]


def bench_sources(backend: str) -> list[Path]:
    """Files outside ``mncore_hdl`` that a backend runs (the cocotb coroutine of the RTL bench)."""
    if backend == "model":
        return []
    return [Path(__file__).resolve().parents[3] / "sim" / "tb_memctrl_bench.py"]


def _burst(config: ArchConfig, w: Workload) -> int:
    if w.burst_lw:
        return w.burst_lw
    return config.timing.burst_length if w.pattern == "random" else config.row_lw


# -- memory controller: analytic model ---------------------------------------------------------

def _memctrl_model(config: ArchConfig, w: Workload) -> dict[str, Any]:
    from ..memctrl import timing

    total = w.lw * w.ports
    if w.pattern == "random":
        raise ValueError("The memctrl timing model has no rule for random traffic; "
                         "run random points on an RTL backend (icarus or verilator)")
    if _burst(config, w) != config.row_lw:
        raise ValueError(f"The memctrl timing model describes one-row bursts "
                         f"({config.row_lw} LW), not burst_lw={w.burst_lw}; "
                         "run other burst lengths on an RTL backend")
    if w.pattern == "mixed":
        reads = round(total * w.read_share)
        cycles = timing.mixed_cycles(config, reads, total - reads)
    else:
        cycles = timing.stream_cycles(config, total, write=w.pattern == "write")
    return {"cycles": cycles, "beats": total, "efficiency": total / cycles}


def bound_efficiency(config: ArchConfig, w: Workload) -> float | None:
    """The best data-bus efficiency any scheduler could reach for this traffic, when the kit's
    timing model has a bound function (issue 26 adds one; wire it here). None today."""
    return None


# -- layout converter: analytic model ----------------------------------------------------------

def _layouts(config: ArchConfig, w: Workload) -> tuple[Any, Any]:
    from ..layout import Layout, host_layout, native_layout

    r, c = w.shape
    if w.pair == "host->native":
        return host_layout((r, c), w.dtype), native_layout((r, c), w.dtype, config)
    if w.pair == "native->host":
        return native_layout((r, c), w.dtype, config), host_layout((r, c), w.dtype)
    if w.pair == "transpose":
        if r % 2:
            raise ValueError(f"The transpose pair needs an even row count, not shape {w.shape}")
        return (host_layout((r, c), w.dtype),
                Layout.parse(f"({r},{c})/(({r // 2}:1, 2_W:1), ({c}:{r // 2}))", w.dtype))
    if r % 4 or c % 2:
        raise ValueError(f"Group redistribution needs rows divisible by 4 and even columns, "
                         f"not shape {w.shape}")
    groups = config.groups
    return (Layout.parse(f"({r},{c})/(({r // groups}:{c // 2}, {groups}_G:1), "
                         f"({c // 2}:1, 2_W:1))", w.dtype),
            Layout.parse(f"({r},{c})/(({groups}_G:1, {r // groups}:{c // 2}), "
                         f"({c // 2}:1, 2_W:1))", w.dtype))


def _convert_model(config: ArchConfig, w: Workload) -> dict[str, Any]:
    from ..converter.program import compile_program
    from ..converter.timing import conversion_cycles, converter_beats
    from ..layout import conversion

    src, dst = _layouts(config, w)
    desc = conversion(src, dst)
    cycles = conversion_cycles(config, desc, w.buffer_lw)
    read, written = converter_beats(compile_program(desc, config, w.buffer_lw))
    # The busiest Group's bus (reads + writes there, one LW a cycle) bounds any converter.
    per_group = [0] * config.groups
    for layout in (src, dst):
        for g in range(layout.groups):
            per_group[g % config.groups] += layout.lw_per_group
    return {"cycles": cycles, "beats": read + written,
            "converter_bytes": (read + written) * config.lw_bytes,
            "efficiency": (read + written) / cycles,
            "bound_ratio": max(per_group) / cycles}


def model_figures(config: ArchConfig, w: Workload) -> dict[str, Any]:
    """Figures of one point on the analytic timing models (milliseconds)."""
    if w.kind == "convert":
        return _convert_model(config, w)
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
    """The bench top's Verilog, converted once per design and config even when workers race."""
    from ..memctrl.trafficgen import BenchTop
    from ..tooling.verilog import export_verilog

    meta = {"component": "BenchTop", "ports": RTL_PORTS, "config": config.to_dict()}
    out = build_root / "verilog"
    out.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
    with open(out / f".memctrl_bench-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return export_verilog(lambda: BenchTop(config, RTL_PORTS), "memctrl_bench", meta, out,
                              design=BenchTop)


def rtl_figures(config: ArchConfig, w: Workload, simulator: str, name: str) -> dict[str, Any]:
    """Figures of one point on the RTL bench top, on ``simulator`` (``icarus``/``verilator``).

    ``name`` names the point's output folder below ``build/sim``. The Verilog and the compiled
    simulation are cached by design and config there, so points on one node share them.
    """
    import pytest

    from ..testing.runner import BUILD_ROOT, run_cocotb

    if w.kind != "memctrl":
        raise ValueError(f"The RTL sweep backend runs memctrl workloads, not {w.kind!r} "
                         "(run conversions on the model backend)")
    case = {"name": name, "ports": RTL_PORTS, "gens": _generators(config, w)}
    verilog = _export_bench(config, BUILD_ROOT)
    out = BUILD_ROOT / name / "results.json"
    env = {"MC_BENCH_CASES": json.dumps([case]), "MC_BENCH_OUT": str(out),
           "COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING"}
    saved = os.environ.get("SIM")
    os.environ["SIM"] = simulator
    try:
        run_cocotb(verilog, "memctrl_bench", "tb_memctrl_bench", "run_cases", seed=1,
                   test_name=name, extra_env=env, waves=False)
    except pytest.fail.Exception as exc:  # the runner reports a failed bench through pytest
        raise RuntimeError(str(exc)) from None
    finally:
        if saved is None:
            os.environ.pop("SIM", None)
        else:
            os.environ["SIM"] = saved
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
