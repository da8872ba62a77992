"""Conversion points: the layout pairs, on the converter's timing model or the memory-system top."""

from __future__ import annotations

import json
from typing import Any

from ..arch import ArchConfig
from .workload import Workload

__all__ = ["layouts", "model_figures", "rtl_figures"]

#: Conversions up to this size are also checked word for word against the golden model.
CHECK_BYTES = 64 << 10


def layouts(config: ArchConfig, w: Workload) -> tuple[Any, Any]:
    """Source and destination layouts of ``w.pair`` for ``w.shape`` (as bench_converter.py)."""
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
    g = config.groups
    if r % g or c % 2:
        raise ValueError(f"Group redistribution needs rows divisible by {g} and even columns, "
                         f"not shape {w.shape}")
    return (Layout.parse(f"({r},{c})/(({r // g}:{c // 2}, {g}_G:1), ({c // 2}:1, 2_W:1))",
                         w.dtype),
            Layout.parse(f"({r},{c})/(({g}_G:1, {r // g}:{c // 2}), ({c // 2}:1, 2_W:1))",
                         w.dtype))


def _figures(config: ArchConfig, src: Any, dst: Any, cycles: int, read: int,
             written: int) -> dict[str, Any]:
    # The busiest Group's bus (reads + writes there, one LW a cycle) bounds any converter.
    per_group = [0] * config.groups
    for layout in (src, dst):
        for g in range(layout.groups):
            per_group[g % config.groups] += layout.lw_per_group
    return {"cycles": cycles, "beats": read + written,
            "converter_bytes": (read + written) * config.lw_bytes,
            "efficiency": (read + written) / cycles, "bound_ratio": max(per_group) / cycles}


def model_figures(config: ArchConfig, w: Workload) -> dict[str, Any]:
    """Figures of a conversion on ``converter.timing`` (the functional model's cycles)."""
    from ..converter.program import compile_program
    from ..converter.timing import conversion_cycles, converter_beats
    from ..layout import conversion

    src, dst = layouts(config, w)
    desc = conversion(src, dst)
    cycles = conversion_cycles(config, desc, w.buffer_lw)
    read, written = converter_beats(compile_program(desc, config, w.buffer_lw))
    return _figures(config, src, dst, cycles, read, written)


def rtl_figures(config: ArchConfig, w: Workload, simulator: str, name: str) -> dict[str, Any]:
    """Figures of a conversion on the memory-system top (``sim/tb_converter_bench.py``): source
    at LW 0 and destination at half the window, both from Group 0."""
    from ..contracts.cosim import BACKING_STORE
    from ..converter.program import DEFAULT_BUFFER_LW
    from ..testing.runner import BUILD_ROOT
    from ..top.system import MemorySystem
    from .benches import export_once, run_bench

    if w.buffer_lw != DEFAULT_BUFFER_LW:
        raise ValueError(f"The RTL converter bench runs the default {DEFAULT_BUFFER_LW}-LW "
                         f"buffer, not buffer_lw={w.buffer_lw}; sweep the buffer on the model")
    src, dst = layouts(config, w)
    half = config.sim_window_lw // 2
    if max(src.lw_per_group, dst.lw_per_group) > half:
        raise ValueError(f"Shape {w.shape} needs more than half the simulated window "
                         f"({half} LW a Group); raise sim_window_lw")
    case = {"name": name, "src": str(src), "dst": str(dst), "dtype": src.dtype,
            "src_base": [0, 0], "dst_base": [0, half]}
    verilog = export_once(lambda: MemorySystem(config), "mem_system",
                          {"component": "MemorySystem", "config": config.to_dict()},
                          MemorySystem, BUILD_ROOT)
    out = BUILD_ROOT / name / "results.json"
    env = {"CONV_BENCH_CASES": json.dumps([case]), "CONV_BENCH_OUT": str(out),
           "CONV_MEM_PATH": BACKING_STORE["system"], "CONV_CONFIG": json.dumps(config.to_dict()),
           "CONV_BENCH_CHECK": "1" if src.nbytes <= CHECK_BYTES else "0"}
    run_bench(verilog, "mem_system", "tb_converter_bench", "measure", name, env, simulator)
    (result,) = json.loads(out.read_text())
    return _figures(config, src, dst, result["busy_cycles"], result["beats_read"],
                    result["beats_written"])
