"""Negotiation: the layout of every handed-off tensor that minimises a pipeline's modeled cycles.

Pure: it reads compiled programs and the cost model (:mod:`mlsdk.costs`), never a device. A
pipeline's cost is the sum of its Launches (each function's, times its calls) and of its
hand-offs (each edge's Bind or Convert, times its count). Launch cost is a sum over buffers, so
only the IOs on hand-off edges can change it, and each connected group of them (a
*component*: the IOs edges join, and an input and output of one function that share a name,
which one constraint sets together) is solved on its own: every assignment of its candidate
layouts (the defaults and pinned layouts of its IOs) when there are few, else coordinate
descent from each uniform choice.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mncore_hdl.arch import ArchConfig
from mncore_hdl.layout import Layout

from ..costs import HandoffCost, buffer_cycles, handoff_cost, launch_cycles, memcopyable

__all__ = ["Port", "Edge", "Problem", "Costed", "evaluate", "negotiate", "consumer_first",
           "defaults", "EXHAUSTIVE_LIMIT", "MAX_COMPONENT_PORTS"]

#: Assignments of one component tried one by one, at most; beyond, coordinate descent.
EXHAUSTIVE_LIMIT = 4096
#: The most IOs one component may join (coordinate descent, and each edge's alternatives,
#: cost a power of this): past it, negotiation is refused rather than left to run for hours.
MAX_COMPONENT_PORTS = 64


@dataclass(frozen=True, order=True)
class Port:
    """One IO of one function of the pipeline."""

    function: str
    name: str
    output: bool

    def __str__(self) -> str:
        return f"{self.function}.{self.name}" + (" (out)" if self.output else " (in)")


@dataclass(frozen=True)
class Edge:
    """A hand-off: output ``src`` passed to input ``dst``, ``count`` times a pipeline run."""

    src: Port
    dst: Port
    count: int = 1

    def __str__(self) -> str:
        return f"{self.src.function}.{self.src.name} -> {self.dst.function}.{self.dst.name}"


@dataclass
class Problem:
    """What to negotiate: each function's program (compiled with defaults and pins), its
    calls per run, the hand-off edges and the layouts the user pinned."""

    config: ArchConfig
    programs: Mapping[str, Any]
    calls: Mapping[str, int]
    edges: list[Edge]
    pinned: Mapping[Port, Layout] = field(default_factory=dict)

    def default(self, port: Port) -> Layout:
        """The layout ``port`` has when compiled without a constraint (or with its pin)."""
        program = self.programs[port.function]
        return program.output_layouts[port.name] if port.output else program.layouts[port.name]

    def twin(self, port: Port) -> Port | None:
        """The input (output) of the same name as output (input) ``port``, if the function has
        one: one constraint key sets both."""
        program = self.programs[port.function]
        names = program.inputs if port.output else program.outputs
        return Port(port.function, port.name, not port.output) if port.name in names else None


@dataclass
class Costed:
    """An assignment and its modeled cost over one pipeline run."""

    layouts: dict[Port, Layout]
    cycles: int
    converter_bytes: int
    launches: dict[str, int]
    handoffs: list[HandoffCost]


def evaluate(problem: Problem, layouts: Mapping[Port, Layout],
             dst_groups: Mapping[Port, int] | None = None) -> Costed:
    """The modeled cycles and converter bytes of one run with the ports in ``layouts`` (the
    rest at their defaults): Launches times calls, plus hand-offs times counts.

    ``dst_groups``: the first Group of an input's own buffer, where known (a conversion's
    cycles depend a little on it); 0 otherwise, as for every source.
    """
    groups = dst_groups or {}
    launches = {}
    for fn, program in problem.programs.items():
        ins = {p.name: lay for p, lay in layouts.items() if p.function == fn and not p.output}
        outs = {p.name: lay for p, lay in layouts.items() if p.function == fn and p.output}
        launches[fn] = launch_cycles(problem.config, program, ins, outs)
    handoffs = [handoff_cost(problem.config, _at(problem, layouts, e.src),
                             _at(problem, layouts, e.dst), dst_group=groups.get(e.dst, 0))
                for e in problem.edges]
    cycles = sum(launches[fn] * problem.calls[fn] for fn in launches)
    cycles += sum(h.cycles * e.count for h, e in zip(handoffs, problem.edges, strict=True))
    moved = sum(h.converter_bytes * e.count
                for h, e in zip(handoffs, problem.edges, strict=True))
    return Costed(dict(layouts), cycles, moved, launches, handoffs)


def _at(problem: Problem, layouts: Mapping[Port, Layout], port: Port) -> Layout:
    return layouts.get(port) or problem.default(port)


def defaults(problem: Problem) -> Costed:
    """Every IO as plain ``compile`` gives it (the user's pins kept)."""
    return evaluate(problem, {})


def consumer_first(problem: Problem) -> list[tuple[dict[Port, Port], Costed]]:
    """MLSDK's manual way, every choice of it: each producer output constrained to the input
    spec of one of its consumers (compiled first, with defaults). Returns, per choice, the
    output -> input it follows and the cost."""
    consumers: dict[Port, list[Port]] = {}
    for edge in problem.edges:
        consumers.setdefault(edge.src, []).append(edge.dst)
    outputs = sorted(consumers)
    choices = []
    for picked in itertools.islice(itertools.product(*(consumers[o] for o in outputs)), 256):
        layouts: dict[Port, Layout] = {}
        for out, dst in zip(outputs, picked, strict=True):
            if out in problem.pinned:
                continue
            layout = problem.default(dst)
            layouts[out] = layout
            twin = problem.twin(out)
            if twin is not None:
                layouts[twin] = layout
        choices.append((dict(zip(outputs, picked, strict=True)), evaluate(problem, layouts)))
    return choices


# -- the search ----------------------------------------------------------------------------


class _Component:
    """Ports joined by edges and twins; its variables are classes of ports that take one
    layout (a port and its twin)."""

    def __init__(self, problem: Problem, ports: list[Port], edges: list[Edge]):
        self.problem = problem
        self.edges = edges
        classes: dict[Port, tuple[Port, ...]] = {}
        for port in ports:
            twin = problem.twin(port)
            members = tuple(sorted({port, twin} - {None})) if twin in ports else (port,)
            classes[port] = members  # type: ignore[assignment]
        self.classes = sorted(set(classes.values()))
        self.pinned = {c: problem.pinned[p] for c in self.classes for p in c
                       if p in problem.pinned}
        self.candidates = _distinct([problem.default(p) for p in ports]
                                    + list(self.pinned.values()))

    def cost(self, choice: Mapping[tuple[Port, ...], Layout]) -> int:
        """Cycles of this component's buffers and hand-offs under ``choice``."""
        config, calls = self.problem.config, self.problem.calls
        at = {p: lay for c, lay in choice.items() for p in c}
        total = sum(calls[p.function] * buffer_cycles(config, lay, write=p.output)
                    for p, lay in at.items())
        return total + sum(e.count * handoff_cost(config, at[e.src], at[e.dst]).cycles
                           for e in self.edges)

    def free(self) -> list[tuple[Port, ...]]:
        return [c for c in self.classes if c not in self.pinned]

    def solve(self, forced: Mapping[tuple[Port, ...], Layout] | None = None,
              ) -> tuple[int, dict[tuple[Port, ...], Layout]]:
        """The cheapest choice (with ``forced`` classes fixed): its cost and layouts."""
        fixed = {**self.pinned, **(forced or {})}
        free = [c for c in self.classes if c not in fixed]
        options: Iterable[dict[tuple[Port, ...], Layout]]
        if len(self.candidates) ** len(free) <= EXHAUSTIVE_LIMIT:
            options = (dict(zip(free, pick, strict=True))
                       for pick in itertools.product(self.candidates, repeat=len(free)))
        else:
            options = self._descend(fixed, free)
        best: tuple[int, dict[tuple[Port, ...], Layout]] | None = None
        for option in options:
            choice = {**fixed, **option}
            cost = self.cost(choice)
            if best is None or cost < best[0]:
                best = (cost, choice)
        assert best is not None  # candidates are never empty: every port has a default
        return best

    def _descend(self, fixed: Mapping[tuple[Port, ...], Layout],
                 free: list[tuple[Port, ...]]) -> list[dict[tuple[Port, ...], Layout]]:
        """Local optima of coordinate descent, one from each uniform start."""
        found = []
        for start in self.candidates:
            choice = {c: start for c in free}
            current = self.cost({**fixed, **choice})
            improved = True
            while improved:
                improved = False
                for c in free:
                    for layout in self.candidates:
                        cost = self.cost({**fixed, **choice, c: layout})
                        if cost < current:
                            choice[c], current, improved = layout, cost, True
            found.append(dict(choice))
        return found


def _distinct(layouts: Iterable[Layout]) -> list[Layout]:
    kept: list[Layout] = []
    for layout in layouts:
        if not any(memcopyable(layout, k) and memcopyable(k, layout) for k in kept):
            kept.append(layout)
    return kept


def components(problem: Problem) -> list[_Component]:
    """The independent parts of the problem (see the module docstring)."""
    parent: dict[Port, Port] = {}

    def find(p: Port) -> Port:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    for edge in problem.edges:
        for port in (edge.src, edge.dst):
            twin = problem.twin(port)
            if twin is not None:
                parent[find(twin)] = find(port)
        parent[find(edge.src)] = find(edge.dst)
    groups: dict[Port, list[Port]] = {}
    for port in list(parent):
        groups.setdefault(find(port), []).append(port)
    for root, ports in groups.items():
        if len(ports) > MAX_COMPONENT_PORTS:
            raise ValueError(f"The pipeline's hand-offs join {len(ports)} IOs into one group "
                             f"(around {root}); negotiation handles at most "
                             f"{MAX_COMPONENT_PORTS} (MAX_COMPONENT_PORTS). Pin some layouts "
                             "with io_spec_constraints and connect fewer IOs to one tensor")
    return [_Component(problem, sorted(ports),
                       [e for e in problem.edges if find(e.src) == root])
            for root, ports in sorted(groups.items())]


def negotiate(problem: Problem) -> tuple[Costed, dict[Edge, list[tuple[Layout, int]]]]:
    """The cheapest assignment, and per edge the pipeline's total with that edge's two ends
    forced to each candidate layout (its alternatives)."""
    layouts: dict[Port, Layout] = {}
    solved = []
    for comp in components(problem):
        cost, choice = comp.solve()
        solved.append((comp, cost))
        layouts.update({p: lay for c, lay in choice.items() for p in c})
    best = evaluate(problem, layouts)
    alternatives: dict[Edge, list[tuple[Layout, int]]] = {}
    for comp, cost in solved:
        for edge in comp.edges:
            ends = {c for c in comp.classes if edge.src in c or edge.dst in c}
            rows = []
            for layout in comp.candidates:
                if any(comp.pinned.get(c, layout) != layout for c in ends):
                    continue
                alt, _ = comp.solve({c: layout for c in ends})
                rows.append((layout, best.cycles - cost + alt))
            alternatives[edge] = rows
    return best, alternatives
