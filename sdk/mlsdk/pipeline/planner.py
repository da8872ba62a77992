"""Pipeline: the planner a user adds functions and hand-offs to, and the pipeline it compiles."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from mncore_hdl.layout import Layout
from mncore_hdl.tooling.files import atomic_write

from ..compiled import CompiledFunction
from ..errors import MLSDKError
from ..iospec import IOSpec
from ..storage import StoragePath
from ..storage import path as storage_path
from .negotiate import (
    Costed,
    Edge,
    Port,
    Problem,
    consumer_first,
    defaults,
    evaluate,
    negotiate,
)
from .planfile import check_plan

__all__ = ["Pipeline", "CompiledPipeline", "PLAN_FILE", "MAX_PIPELINE_FUNCTIONS",
           "MAX_PIPELINE_EDGES"]

#: The most functions and hand-offs one pipeline may have (each function is compiled twice).
MAX_PIPELINE_FUNCTIONS = 256
MAX_PIPELINE_EDGES = 4096

#: The plan's file, beside the functions' codegen directories.
PLAN_FILE = "pipeline_plan.json"


class Compiler(Protocol):
    """What a Pipeline compiles with: :class:`mlsdk.Context` (declared here so that this
    module need not import the facade above it)."""

    @property
    def compile(self) -> Callable[..., CompiledFunction]:
        """``compile(fn, sample_inputs, codegen_dir, **options) -> CompiledFunction``."""

    @property
    def mndevice(self) -> Any:
        """The device (its ``config`` is the chip the plan models)."""


@dataclass
class _Entry:
    fn: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
    samples: Mapping[str, torch.Tensor]
    calls: int
    compile_kwargs: dict[str, Any]


@dataclass
class CompiledPipeline:
    """The compiled functions of a pipeline and the plan they were compiled to.

    Attributes
    ----------
    functions : dict of str to CompiledFunction
        By the names given to :meth:`Pipeline.add`, each compiled into
        ``codegen_dir / name``.
    plan : dict
        The plan (saved as ``codegen_dir / pipeline_plan.json``): per function its calls,
        constraints and modeled Launch cycles; per edge the chosen layouts, the hand-off's
        modeled cycles and converter bytes, and the pipeline's total with the edge in each
        alternative layout; the totals of the negotiated plan, of all defaults and of every
        consumer-first choice. Figures are modeled with every buffer's first Group at 0,
        except ``placed_cycles`` (per edge and in the negotiated totals): the compiled
        pipeline, each conversion into the Group its destination buffer was given.
    """

    functions: dict[str, CompiledFunction]
    plan: dict[str, Any]

    def __getitem__(self, name: str) -> CompiledFunction:
        return self.functions[name]

    def summary(self) -> str:
        """The plan's totals and edges as text."""
        return format_plan(self.plan)


class Pipeline:
    """A planner: functions with sample inputs, the hand-offs between them, and the layouts
    chosen for every handed-off tensor to minimise the pipeline's modeled cycles.

    Functions are added in any order (no compile order is required). :meth:`compile`
    compiles each once with defaults to learn its IOs, negotiates (:mod:`.negotiate`), then
    compiles each with the chosen layouts as ``io_spec_constraints``.

    Parameters
    ----------
    context : Context
        Where the functions are compiled and loaded.

    Examples
    --------
    >>> pipe = Pipeline(context)
    >>> pipe.add("enc", encoder, {"x": x})
    >>> pipe.add("dec", decoder, {"h": h, "k": k}, calls=2)
    >>> pipe.connect("enc.h", "dec.h")            # twice a run: dec's calls
    >>> pipe.connect("dec.k_out", "dec.k")        # loop-carried
    >>> compiled = pipe.compile(storage.path("/tmp/pipe"))
    >>> compiled["dec"], compiled.plan["totals"]
    """

    def __init__(self, context: Compiler):
        self.context = context
        self._entries: dict[str, _Entry] = {}
        self._edges: list[tuple[str, str, str, str, int | None]] = []

    def add(self, name: str, fn: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]],
            sample_inputs: Mapping[str, torch.Tensor], *, calls: int = 1,
            **compile_kwargs: Any) -> None:
        """Add function ``fn`` as ``name``, called ``calls`` times a pipeline run.

        ``compile_kwargs`` (``options``, ``training``, ``io_spec_constraints``, ...) go to
        ``Context.compile``; layouts given in ``io_spec_constraints`` are pinned: the
        negotiation keeps them.
        """
        if not isinstance(name, str) or not name or len(name) > 128 \
                or any(c in name for c in "./\\\0") or not name.isprintable():
            raise ValueError(f"A pipeline function's name must be 1 to 128 printable "
                             f"characters without '.', '/' or '\\' (it names the folder "
                             f"codegen_dir / name), not {name!r}")
        if name in self._entries:
            raise ValueError(f"The pipeline already has a function named {name!r}")
        if len(self._entries) >= MAX_PIPELINE_FUNCTIONS:
            raise ValueError(f"A pipeline holds at most {MAX_PIPELINE_FUNCTIONS} functions "
                             f"(MAX_PIPELINE_FUNCTIONS); {name!r} would be one more. Split it "
                             "into pipelines joined by io_spec_constraints")
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
            raise ValueError(f"calls must be a positive int, not {calls!r}")
        self._entries[name] = _Entry(fn, sample_inputs, calls, dict(compile_kwargs))

    def connect(self, src: str, dst: str, *, count: int | None = None) -> None:
        """Hand output ``src`` (``"function.output"``) to input ``dst`` (``"function.input"``),
        ``count`` times a run (default: the consumer's calls). A function may feed itself
        (loop-carried state)."""
        (sf, so), (df, di) = _split(src, "src"), _split(dst, "dst")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 1):
            raise ValueError(f"count must be a positive int or None, not {count!r}")
        if len(self._edges) >= MAX_PIPELINE_EDGES:
            raise ValueError(f"A pipeline holds at most {MAX_PIPELINE_EDGES} hand-offs "
                             f"(MAX_PIPELINE_EDGES); {src} -> {dst} would be one more")
        self._edges.append((sf, so, df, di, count))

    # -- planning and compiling -------------------------------------------------------------

    def compile(self, codegen_dir: StoragePath) -> CompiledPipeline:
        """Negotiate the layouts, compile every function into ``codegen_dir / name``, and
        save the plan as ``codegen_dir / pipeline_plan.json``."""
        if not isinstance(codegen_dir, StoragePath):
            raise TypeError("The codegen directory must be given as storage.path(...), not "
                            f"{type(codegen_dir).__name__}")
        # The probes (each function compiled with defaults, to learn its IOs) go to a folder
        # of this compile's own, made here and removed after: a planted probes/ (a symlink
        # elsewhere, another user's) is never written through, and none is left behind.
        root = Path(codegen_dir.path)
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".probes-", dir=root))
        probes: dict[str, CompiledFunction] = {}
        try:
            for name in self._entries:
                probes[name] = self._compile(name, storage_path(scratch) / name, {})
            problem = self._problem(probes)
            plan, chosen = _plan(problem)
        finally:
            for probe in probes.values():
                probe.unload()
            shutil.rmtree(scratch, ignore_errors=True)
        functions = {}
        for name in self._entries:
            constraints = _constraints(problem, chosen, name)
            functions[name] = self._compile(name, codegen_dir / name, constraints)
            plan["functions"][name]["codegen_dir"] = str(codegen_dir / name)
        _check_compiled(functions, chosen)
        _place(plan, problem, chosen, functions)
        check_plan(plan)  # what load_plan reads back is what was written
        # A temporary and a rename: a planted symlink at the plan's name is replaced, never
        # written through, and a reader sees the old plan or the new one.
        atomic_write(root / PLAN_FILE, json.dumps(plan, indent=1) + "\n")
        return CompiledPipeline(functions, plan)

    def _compile(self, name: str, where: StoragePath,
                 constraints: Mapping[str, Layout]) -> CompiledFunction:
        entry = self._entries[name]
        kwargs = dict(entry.compile_kwargs)
        pins = dict(kwargs.pop("io_spec_constraints", None) or {})
        return self.context.compile(entry.fn, entry.samples, where,
                                    io_spec_constraints={**pins, **constraints} or None,
                                    **kwargs)

    def _problem(self, probes: Mapping[str, CompiledFunction]) -> Problem:
        edges = []
        for sf, so, df, di, count in self._edges:
            for fn, io, names, what in ((sf, so, "output_specs", "output"),
                                        (df, di, "input_specs", "input")):
                if fn not in probes:
                    raise ValueError(f"Edge {sf}.{so} -> {df}.{di}: the pipeline has no "
                                     f"function {fn!r}; it has {list(probes)}")
                specs = getattr(probes[fn], names)
                if io not in specs:
                    raise ValueError(f"Edge {sf}.{so} -> {df}.{di}: {fn} has no {what} "
                                     f"{io!r}; its {what}s are {list(specs)}")
            out, inp = probes[sf].output_specs[so], probes[df].input_specs[di]
            if out.shape != inp.shape or out.dtype != inp.dtype:
                raise ValueError(f"Edge {sf}.{so} -> {df}.{di} cannot hand {out} to {inp}: "
                                 f"they differ in {out.describe_difference(inp)}")
            edges.append(Edge(Port(sf, so, True), Port(df, di, False),
                              count if count is not None else self._entries[df].calls))
        pinned = {}
        for name, entry in self._entries.items():
            for key in entry.compile_kwargs.get("io_spec_constraints") or {}:
                for port, specs in ((Port(name, key, False), probes[name].input_specs),
                                    (Port(name, key, True), probes[name].output_specs)):
                    if key in specs:
                        pinned[port] = specs[key].layout
        return Problem(self.context.mndevice.config,
                       {n: p.program for n, p in probes.items()},
                       {n: e.calls for n, e in self._entries.items()}, edges, pinned)


def _split(io: str, what: str) -> tuple[str, str]:
    if not isinstance(io, str) or io.count(".") < 1 or io.startswith("."):
        raise ValueError(f"{what} must be 'function.io' (e.g. 'enc.h'), not {io!r}")
    fn, name = io.split(".", 1)
    return fn, name


def _plan(problem: Problem) -> tuple[dict[str, Any], dict[Port, Layout]]:
    """The plan as JSON-able values, and the layout of every port it chose."""
    best, alternatives = negotiate(problem)
    base = defaults(problem)
    manual = consumer_first(problem)
    # Never worse than the baselines the search may not cover (defaults keep twins apart).
    for _, costed in [(None, base), *manual]:
        if costed.cycles < best.cycles:
            best = costed
    edges = []
    for edge, cost in zip(problem.edges, best.handoffs, strict=True):
        src = best.layouts.get(edge.src) or problem.default(edge.src)
        dst = best.layouts.get(edge.dst) or problem.default(edge.dst)
        edges.append({"edge": str(edge), "count": edge.count, "src_layout": str(src),
                      "dst_layout": str(dst), **cost.to_dict(),
                      "alternatives": [{"layout": str(lay), "total_cycles": total}
                                       for lay, total in alternatives.get(edge, [])]})
    functions = {name: {"calls": problem.calls[name], "launch_cycles": best.launches[name],
                        "constraints": {k: str(v) for k, v in
                                        _constraints(problem, best.layouts, name).items()}}
                 for name in problem.programs}
    plan = {"functions": functions, "edges": edges, "totals": {
        "negotiated": _totals(best), "defaults": _totals(base),
        "consumer_first": [{"follows": {str(o): str(i) for o, i in follows.items()},
                            **_totals(costed)} for follows, costed in manual]}}
    return plan, best.layouts


def _totals(costed: Costed) -> dict[str, int]:
    return {"cycles": costed.cycles, "converter_bytes": costed.converter_bytes}


def _constraints(problem: Problem, chosen: Mapping[Port, Layout], fn: str) -> dict[str, Layout]:
    """The ``io_spec_constraints`` that give function ``fn`` its chosen layouts (only where
    they differ from what it gets anyway)."""
    out = {}
    for port, layout in sorted(chosen.items()):
        if port.function == fn and port not in problem.pinned and \
                str(problem.default(port).normalized) != str(layout.normalized):
            out[port.name] = layout
    return out


def _place(plan: dict[str, Any], problem: Problem, chosen: Mapping[Port, Layout],
           functions: Mapping[str, CompiledFunction]) -> None:
    """Add to ``plan`` the model of the compiled pipeline: its inputs' own buffers are now
    allocated, so each conversion is modeled into the Group its destination really has
    (``placed_cycles``, per edge and in the totals)."""
    groups = {}
    for edge in problem.edges:
        own = functions[edge.dst.function].bindings.get(edge.dst.name)
        if own is not None:
            groups[edge.dst] = own.group
    placed = evaluate(problem, chosen, groups)
    for row, cost in zip(plan["edges"], placed.handoffs, strict=True):
        row["placed_cycles"] = cost.cycles
    plan["totals"]["negotiated"]["placed_cycles"] = placed.cycles


def _check_compiled(functions: Mapping[str, CompiledFunction],
                    chosen: Mapping[Port, Layout]) -> None:
    for port, layout in chosen.items():
        fn = functions[port.function]
        spec = (fn.output_specs if port.output else fn.input_specs)[port.name]
        want = IOSpec(spec.name, spec.shape, spec.dtype, layout)
        if not spec.is_memcopyable_to(want):
            raise MLSDKError(f"{port} was compiled to {spec.layout}, not the plan's {layout}")


def format_plan(plan: Mapping[str, Any]) -> str:
    """A plan's totals and edges as an aligned text table (CodegenError, naming the field,
    for a plan that is not consistent: see :func:`.planfile.check_plan`)."""
    check_plan(plan)
    t = plan["totals"]
    lines = [f"{'plan':<16} {'cycles':>10} {'converter B':>12}",
             f"{'negotiated':<16} {t['negotiated']['cycles']:>10} "
             f"{t['negotiated']['converter_bytes']:>12}",
             f"{'defaults':<16} {t['defaults']['cycles']:>10} "
             f"{t['defaults']['converter_bytes']:>12}"]
    if t["consumer_first"]:
        best = min(t["consumer_first"], key=lambda c: c["cycles"])
        lines.append(f"{'consumer-first':<16} {best['cycles']:>10} "
                     f"{best['converter_bytes']:>12}")
    for edge in plan["edges"]:
        kind = "Bind" if edge["relocation"] else "Convert"
        alts = ", ".join(f"{a['layout']}: {a['total_cycles']}" for a in edge["alternatives"])
        lines.append(f"{edge['edge']} x{edge['count']}: {kind} {edge['cycles']} cycles, "
                     f"{edge['converter_bytes']} B in {edge['dst_layout']} (totals: {alts})")
    return "\n".join(lines)
