"""Soak: random command streams, checked call by call, with RSS sampled over time (the logic of
``bench/soak.py``, which prints it; the soak tests run a few seconds of it).

Each seed is one random stream on one or more Contexts in lockstep: a few small functions
(random shapes, dtypes, ops, closed-over constants, random DRAM layouts pinned through
``io_spec_constraints`` or left to the compiler), then calls with host tensors and with
TensorProxies (relocations where a producer was compiled against the consumer's spec,
layout conversions otherwise), ``.cpu()`` reads interleaved, frees, unloads and reloads from
the codegen directory. Every read is checked bit for bit against the compiler's interpreter
run on the same inputs. With two devices, each seed also compares the two devices' records
(commands, bytes per path, conversions, relocations) and their whole DRAM. At the end of a
seed everything is freed and the allocator must be empty (a leak is a mismatch).
"""

from __future__ import annotations

import gc
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from mncore_compiler.interpreter import interpret
from mncore_compiler.layouts import ConstraintError
from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout.random_layouts import random_layout

from mlsdk import Context, IOSpecMismatchError, MNDevice, storage

__all__ = ["Stats", "Stream", "rss_bytes", "soak", "summary"]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

#: Elementwise steps a random function chains: (name, fn(x, w, c)).
STEPS: list[tuple[str, Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]]] = [
    ("mul_c", lambda x, w, c: x * c),
    ("add_c", lambda x, w, c: x + c),
    ("mul_w", lambda x, w, c: x * w),
    ("add_w", lambda x, w, c: x + w),
    ("sub_w", lambda x, w, c: x - w),
    ("relu", lambda x, w, c: torch.relu(x)),
    ("neg", lambda x, w, c: -x),
    ("abs", lambda x, w, c: torch.abs(x)),
]


def rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Stats:
    """What a soak part ran and found."""

    seeds: list[int] = field(default_factory=list)
    calls: int = 0
    reads: int = 0
    handoffs: int = 0
    rejected: int = 0
    reloads: int = 0
    conversions: int = 0
    relocations: int = 0
    pinned: int = 0
    pin_refused: int = 0
    mismatches: list[str] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)


def _make_function(rng: random.Random, dtype: torch.dtype, shape: tuple[int, ...],
                   tag: str) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    steps = [rng.choice(STEPS) for _ in range(rng.randint(1, 3))]
    consts = [round(rng.uniform(-2, 2), 2) for _ in steps]
    gen = torch.Generator().manual_seed(rng.getrandbits(31))
    weight = torch.randn(shape, generator=gen).to(dtype)

    def fn(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        x = inputs["x"]
        for (_, step), c in zip(steps, consts, strict=True):
            x = step(x, weight, c)
        return {"y": x}

    fn.__name__ = f"{tag}_" + "_".join(name for name, _ in steps)
    return fn


class Stream:
    """One seed's random command stream on ``contexts`` (the first is the reference order)."""

    def __init__(self, seed: int, contexts: list[Context], workdir: Path, stats: Stats,
                 max_numel: int, steps: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.contexts = contexts
        self.workdir = workdir / f"s{seed}"
        self.stats = stats
        self.steps = steps
        self.gen = torch.Generator().manual_seed(seed)
        dtype_name = self.rng.choice(list(DTYPES))
        self.dtype_name, self.dtype = dtype_name, DTYPES[dtype_name]
        self.shape = _shape(self.rng, max_numel)
        self.config = contexts[0].mndevice.config
        self.functions: list[list[Any]] = []  # per slot: [per-context CompiledFunction]
        self.paths: list[Any] = []
        self.proxies: list[tuple[list[Any], torch.Tensor, str]] = []  # (per ctx, expected, what)

    def fail(self, what: str) -> None:
        self.stats.mismatches.append(f"seed {self.seed}: {what}")

    # -- building ---------------------------------------------------------------------------

    def compile(self, slot: int, constraint: Any | None) -> None:
        fn = _make_function(self.rng, self.dtype, self.shape, f"f{slot}")
        sample = torch.zeros(self.shape, dtype=self.dtype)
        path = storage.path(self.workdir / f"f{slot}")
        constraints = {}
        if constraint is not None:
            constraints = {constraint[0]: constraint[1]}
        elif self.rng.random() < 0.5:  # random pinned layouts, when the compiler accepts them
            for io in ("x", "y"):
                if self.rng.random() < 0.6:
                    constraints[io] = random_layout(self.rng, self.shape, self.dtype_name,
                                                    self.config.groups, 4096)
        try:
            first = self.contexts[0].compile(fn, {"x": sample}, path,
                                             io_spec_constraints=constraints)
            self.stats.pinned += bool(constraints)
        except ConstraintError:
            self.stats.pin_refused += 1
            first = self.contexts[0].compile(fn, {"x": sample}, path)
        loaded = [first] + [ctx.load_codegen_dir(path) for ctx in self.contexts[1:]]
        if slot < len(self.functions):
            self.functions[slot], self.paths[slot] = loaded, path
        else:
            self.functions.append(loaded)
            self.paths.append(path)

    def reload(self, slot: int) -> None:
        if self.rng.random() < 0.5:
            for f in self.functions[slot]:
                f.unload()
        # Otherwise the old functions are dropped: collected, they unload themselves.
        self.functions[slot] = [ctx.load_codegen_dir(self.paths[slot]) for ctx in self.contexts]
        self.stats.reloads += 1

    # -- running ----------------------------------------------------------------------------

    def call(self, slot: int, source: tuple[list[Any], torch.Tensor, str] | None) -> None:
        fs = self.functions[slot]
        graph = fs[0].program.graph
        if source is None:
            x = torch.randn(self.shape, generator=self.gen).to(self.dtype)
            given = [{"x": x}] * len(fs)
            expected_in, what = x, "host"
        else:
            given = [{"x": p} for p in source[0]]
            expected_in, what = source[1], source[2]
        try:
            outs = [f(g)["y"] for f, g in zip(fs, given, strict=True)]
        except IOSpecMismatchError:
            # The layout converter cannot run this pair: the call must be refused on every
            # device, before anything ran; read the data back and pass it from the host.
            self.stats.rejected += 1
            assert source is not None
            x = source[0][0].cpu()
            outs = [f({"x": x})["y"] for f in fs]
            what = "host"
        self.stats.calls += len(fs)
        if source is not None and what != "host":
            self.stats.handoffs += 1
        expected = interpret(graph, {"x": expected_in})["y"]
        self.proxies.append((outs, expected, f"{fs[0].name}({what})"))

    def read(self, index: int) -> None:
        outs, expected, what = self.proxies[index]
        for ctx, proxy in zip(self.contexts, outs, strict=True):
            got = proxy.cpu()
            self.stats.reads += 1
            if got.dtype != expected.dtype or not torch.equal(
                    got.view(torch.int16 if got.element_size() == 2 else torch.int32),
                    expected.view(torch.int16 if got.element_size() == 2 else torch.int32)):
                self.fail(f"{ctx.mndevice.name}: {what} read back wrong data")

    def free(self, index: int) -> None:
        outs, _, _ = self.proxies.pop(index)
        for proxy in outs:
            proxy.free()

    def run(self) -> None:
        rng = self.rng
        n_functions = rng.randint(2, 4)
        self.compile(0, None)
        for slot in range(1, n_functions):
            if rng.random() < 0.5:
                # A producer pinned to a consumer's input spec: its hand-off is a relocation.
                spec = self.functions[rng.randrange(slot)][0].input_specs["x"]
                self.compile(slot, ("y", spec))
            else:
                self.compile(slot, None)
        for _ in range(self.steps):
            op = rng.random()
            slot = rng.randrange(len(self.functions))
            if op < 0.35 or not self.proxies:
                self.call(slot, None)
            elif op < 0.6:
                self.call(slot, rng.choice(self.proxies))
            elif op < 0.8:
                self.read(rng.randrange(len(self.proxies)))
            elif op < 0.9:
                self.free(rng.randrange(len(self.proxies)))
            else:
                self.reload(slot)
        for index in range(len(self.proxies)):
            self.read(index)
        self.finish()

    def finish(self) -> None:
        """Free everything; the allocators must come back empty and the devices agree."""
        while self.proxies:
            self.free(0)
        for fs in self.functions:
            for f in fs:
                f.unload()
        self.functions.clear()
        for ctx in self.contexts:
            device: Any = ctx.device  # a DRAM device (its allocator, its snapshot)
            left = device.allocator.owners()
            if left:
                self.fail(f"{ctx.mndevice.name}: buffers left after freeing everything: {left}")
        reports = [ctx.report(clear=True) for ctx in self.contexts]
        self.stats.conversions += reports[0].totals["conversions"]
        self.stats.relocations += reports[0].totals["relocations"]
        if len(self.contexts) > 1:
            self._compare(reports)

    def _compare(self, reports: list[Any]) -> None:
        def figures(report: Any) -> list[Any]:
            return [(r.function, r.kind, dict(r.bytes), r.conversions, r.relocations,
                     [c.command for c in r.commands])
                    for r in report]

        first = self.contexts[0]
        base_figures, base_dram = figures(reports[0]), _snapshot(first)
        for ctx, report in zip(self.contexts[1:], reports[1:], strict=True):
            mine = figures(report)
            if mine != base_figures:
                diff = next((a, b) for a, b in zip(base_figures, mine, strict=False) if a != b) \
                    if len(mine) == len(base_figures) else (len(base_figures), len(mine))
                self.fail(f"{ctx.mndevice.name} vs {first.mndevice.name}: records differ: "
                          f"{diff}")
            dram = _snapshot(ctx)
            if not _same_dram(base_dram, dram):
                self.fail(f"{ctx.mndevice.name} vs {first.mndevice.name}: DRAM differs")

    def abandon(self) -> None:
        """After an error: drop everything this seed holds, so the next seed starts clean."""
        for outs, _, _ in self.proxies:
            for proxy in outs:
                proxy.free()
        self.proxies.clear()
        for fs in self.functions:
            for f in fs:
                f.unload()
        self.functions.clear()
        for ctx in self.contexts:
            ctx.report(clear=True)


def _snapshot(ctx: Context) -> Any:
    """The whole DRAM of a Context's device (every device of the soak keeps one)."""
    device: Any = ctx.device
    return device.dram_snapshot()


def _same_dram(a: list[dict[int, Any]], b: list[dict[int, Any]]) -> bool:
    return len(a) == len(b) and all(
        ga.keys() == gb.keys() and all((ga[p] == gb[p]).all() for p in ga)
        for ga, gb in zip(a, b, strict=True))


def _shape(rng: random.Random, max_numel: int) -> tuple[int, ...]:
    while True:
        shape = tuple(rng.choice([1, 2, 3, 4, 5, 8, 12, 16, 32, 64])
                      for _ in range(rng.randint(1, 3)))
        n = 1
        for d in shape:
            n *= d
        if 2 <= n <= max_numel:
            return shape


def soak(devices: list[str], config: ArchConfig, seeds: range, minutes: float | None,
         steps: int, max_numel: int, say: Callable[[str], None] = print) -> Stats:
    """Run ``seeds`` (or until ``minutes`` pass) on ``devices`` in lockstep; return the stats.

    One Context per device serves every seed (its history bounded by ``report(clear=True)``
    after each), so RSS growth over the run shows what a long session keeps.
    """
    stats = Stats()
    contexts = [Context(MNDevice(name, config=config)) for name in devices]
    start = time.monotonic()
    deadline = start + minutes * 60 if minutes else None
    last_sample = -1e9
    try:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            for seed in seeds:
                if deadline is not None and time.monotonic() > deadline:
                    break
                stream = Stream(seed, contexts, Path(tmp), stats, max_numel, steps)
                try:
                    stream.run()
                except Exception as exc:  # noqa: BLE001 - every error is a finding
                    stats.mismatches.append(f"seed {seed}: {type(exc).__name__}: {exc}")
                    stream.abandon()
                del stream
                stats.seeds.append(seed)
                now = time.monotonic() - start
                if now - last_sample >= 5 or len(stats.seeds) == 1:
                    gc.collect()
                    stats.rss.append((now, rss_bytes()))
                    last_sample = now
            gc.collect()
            stats.rss.append((time.monotonic() - start, rss_bytes()))
    finally:
        for ctx in contexts:
            ctx.close()
    return stats


def summary(title: str, stats: Stats, elapsed: float) -> str:
    """The figures of one part, as printed."""
    seeds = stats.seeds
    seed_text = (f"{seeds[0]}..{seeds[-1]}" if seeds and seeds == list(range(seeds[0],
                 seeds[-1] + 1)) else str(seeds))
    lines = [f"== {title}",
             f"seeds run: {len(seeds)} ({seed_text}) in {elapsed:.1f} s",
             f"calls run: {stats.calls} (device hand-offs {stats.handoffs}, refused "
             f"conversions {stats.rejected}), reads checked: {stats.reads}, "
             f"reloads: {stats.reloads}",
             f"on the device: {stats.relocations} relocations, {stats.conversions} "
             f"conversions; compiles with pinned layouts: {stats.pinned} (refused pins "
             f"{stats.pin_refused})",
             f"mismatches: {len(stats.mismatches)}"]
    lines += [f"  {m}" for m in stats.mismatches[:20]]
    if stats.rss:
        # Growth after the first tenth of the run (imports, caches and first allocations).
        warm = stats.rss[min(len(stats.rss) - 1, max(1, len(stats.rss) // 10))]
        end = stats.rss[-1]
        lines.append(f"RSS: start {stats.rss[0][1] / 2**20:.1f} MiB, after warm-up "
                     f"{warm[1] / 2**20:.1f} MiB at {warm[0]:.0f} s, end "
                     f"{end[1] / 2**20:.1f} MiB at {end[0]:.0f} s; growth after warm-up "
                     f"{(end[1] - warm[1]) / 2**20:+.1f} MiB")
        samples = stats.rss[:: max(1, len(stats.rss) // 8)]
        lines.append("RSS samples (s, MiB): " + ", ".join(
            f"({t:.0f}, {r / 2**20:.1f})" for t, r in samples))
    return "\n".join(lines)
