"""Producer -> consumer flows on any device, and a VCD reader, for the relocation proof.

Plain Python (no cocotb coroutines): ``sim/sdk/test_relocation.py`` and ``bench/bench_cosim.py``
call :func:`run_flow` with a device string and get back everything the checks look at;
:func:`staged_conversion` runs one conversion alone, its source staged by back door.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.layout import conversion, host_layout, native_layout, to_device
from mncore_hdl.testing.runner import require_icarus, require_verilator

from mlsdk import Context, MNDevice, storage
from mlsdk.device.commands import Convert


def require_device(device: str) -> None:
    """Skip the calling test when ``device`` needs a simulator this machine lacks."""
    if device.startswith("mncore2:icarus"):
        require_icarus()
    elif device.startswith("mncore2:verilator"):
        require_verilator()


@dataclass(frozen=True)
class StagedConversion:
    """One conversion run alone: what it measured and what it left in the destination."""

    cycles: int
    wall_s: float  # wall time of the Convert command only
    counters: dict[str, int]
    result: np.ndarray
    expected: np.ndarray

    @property
    def exact(self) -> bool:
        return bool((self.result == self.expected).all())


def staged_conversion(device: str, tensor: torch.Tensor) -> StagedConversion:
    """The hand-off's conversion (producer's native output -> consumer's host input) of an fp32
    ``tensor`` on ``device``, with the source stored by ``poke``: no host traffic, no cycles
    spent before the Convert."""
    src = native_layout(tuple(tensor.shape), "float32", MNCORE2_SIM)
    dst = host_layout(tuple(tensor.shape), "float32")
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        dev = ctx.session.dram
        src_buf, dst_buf = dev.allocate(src), dev.allocate(dst)
        dev.poke(src_buf, to_device(tensor, src))
        t = time.perf_counter()
        done = dev.execute(Convert(src_buf, str(src), dst_buf, str(dst),
                                   conversion(src, dst), "float32"))
        wall = time.perf_counter() - t
        return StagedConversion(done.cycles, wall, dev.counters(), dev.peek(dst_buf),
                                to_device(tensor, dst))


@dataclass(frozen=True)
class Flow:
    """A chain of compiled functions: ``x -> s0 -> s1 -> ... -> result``."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    stages: int = 2
    seed: int = 0

    def ops(self):
        """Stage ``k`` maps its input to its output: x*2, then +1, then *3, ..."""
        table = [lambda t: t * 2, lambda t: t + 1, lambda t: t * 3, lambda t: t - 1]
        return table[:self.stages]

    def expected(self, x: torch.Tensor) -> torch.Tensor:
        for op in self.ops():
            x = op(x)
        return x


FLOWS = {
    "seed": Flow("seed", (32, 64)),
    "odd": Flow("odd", (33, 65), seed=1),
    "3d": Flow("3d", (4, 16, 32), seed=2),
    "fp16": Flow("fp16", (32, 64), torch.float16, seed=3),
    "chain3": Flow("chain3", (32, 64), stages=3, seed=4),
}


@dataclass
class FlowRun:
    """What one run of a flow left behind."""

    result: torch.Tensor
    expected: torch.Tensor
    report: Any
    commands: list[str]
    relocated: list[bool] = field(default_factory=list)
    host_beats_between: list[tuple[int, int]] = field(default_factory=list)
    handoff_bytes: list[int] = field(default_factory=list)  # src.nbytes + dst.nbytes
    counters: dict[str, int] = field(default_factory=dict)
    snapshot: list[dict] | None = None
    vcd: Path | None = None


def _names(k: int, stages: int) -> tuple[str, str]:
    inp = "x" if k == 0 else f"s{k - 1}"
    out = "result" if k == stages - 1 else f"s{k}"
    return inp, out


def _stage(op: Callable[[torch.Tensor], torch.Tensor], inp: str, out: str
           ) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    """The compiled function of one stage: ``{out: op(d[inp])}``."""
    return lambda d: {out: op(d[inp])}


def run_flow(flow: Flow, device: str, constrained: bool, codegen: Path) -> FlowRun:
    """Compile the chain (last stage first), run it once, collect results and counters."""
    ctx = Context(MNDevice(device, config=MNCORE2_SIM))
    try:
        gen = torch.Generator().manual_seed(flow.seed)
        sample = torch.randn(flow.shape, generator=gen).to(flow.dtype)
        options = {"float_dtype": "half" if flow.dtype == torch.float16 else "float"}
        compiled: list[Any] = [None] * flow.stages
        for k in reversed(range(flow.stages)):
            inp, out = _names(k, flow.stages)
            op = flow.ops()[k]
            constraints = None
            if constrained and k + 1 < flow.stages:
                constraints = {out: compiled[k + 1].input_specs[out]}
            compiled[k] = ctx.compile(_stage(op, inp, out), {inp: sample},
                                      storage.path(codegen / f"{flow.name}{k}"),
                                      options=options, io_spec_constraints=constraints)
        x = torch.randn(flow.shape, generator=gen).to(flow.dtype)
        device_obj: Any = ctx.device  # host_port_beats() only on the RTL devices
        rtl = hasattr(device_obj, "host_port_beats")
        outputs = compiled[0]({"x": x})
        run = FlowRun(torch.empty(0), flow.expected(x), None, [])
        for k in range(1, flow.stages):
            inp, _ = _names(k, flow.stages)
            before = device_obj.host_port_beats() if rtl else 0
            proxy = outputs[inp]
            outputs = compiled[k](outputs)
            after = device_obj.host_port_beats() if rtl else 0
            run.host_beats_between.append((before, after))
            run.relocated.append(compiled[k].bindings[inp] == proxy.buffer)
            run.handoff_bytes.append(proxy.buffer.nbytes + compiled[k].bindings[inp].nbytes)
        run.result = outputs["result"].cpu()
        run.report = ctx.report()
        run.commands = [c.command for r in run.report for c in r.commands]
        if rtl:
            run.counters = device_obj.counters()
        run.snapshot = device_obj.dram_snapshot()
    finally:
        ctx.close()
    run.vcd = getattr(ctx.device, "vcd_path", None)
    return run


def comparable_records(report: Any) -> list[dict[str, Any]]:
    """``report``'s records as dicts without their cycles (measured on the RTL, modeled on the
    functional model), each command as ``(name, bytes per path)``: what two backends running
    the same program must agree on exactly."""
    records = []
    for record in report.records:
        entry = record.to_dict()
        entry.pop("cycles")
        entry.pop("cycles_kind")
        entry["commands"] = [(c["command"], c["bytes"]) for c in entry["commands"]]
        records.append(entry)
    return records


def top_signal_changes(waves: Path, name: str) -> list[tuple[int, int]]:
    """``(time, value)`` changes of port ``name`` of the design's top, read from an FST or VCD
    file with :class:`mlsdk.waves.Waves` (an x or z value reads as 0).

    The top is the shallowest scope declaring ``busy_cycles`` (the same rule every simulator's
    file satisfies: Icarus and Verilator ``cosim_tb``, Amaranth ``bench.top``).
    """
    from mlsdk.waves import Waves

    times, values = Waves(waves).changes(name)
    return [(int(t), v or 0) for t, v in zip(times, values, strict=True)]
