"""A sweep's results as a table, and its plot: efficiency vs a parameter, Pareto front of cycles
vs area."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["table", "pareto_front", "design_params", "plot"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def table(records: Sequence[dict[str, Any]], params: Sequence[str],
          figures: Sequence[str]) -> str:
    """A fixed-width table: one row a point, the swept parameters then the figures; a failed
    point shows its status and error instead of figures."""
    header = [*params, *figures, "status"]
    rows = []
    for r in records:
        row = [_cell(r["params"].get(p)) for p in params]
        row += [_cell(r["figures"].get(f)) for f in figures]
        row.append(r["status"] if r["status"] == "ok" else f"{r['status']}: {r['error']}")
        rows.append(row)
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    last = len(header) - 1
    lines = ["  ".join(h.ljust(w) if i == last else h.rjust(w)
                       for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    lines.append("-" * len(lines[0]))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == last else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (both minimised), by first
    coordinate."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _series(records: Sequence[dict[str, Any]], x: str,
            others: Sequence[str]) -> dict[str, list[tuple[Any, float]]]:
    out: dict[str, list[tuple[Any, float]]] = {}
    for r in records:
        eff = r["figures"].get("efficiency")
        if r["status"] != "ok" or eff is None:
            continue
        label = " ".join(f"{o}={r['params'][o]}" for o in others) or "all"
        out.setdefault(label, []).append((r["params"][x], eff))
    return out


def design_params(records: Sequence[dict[str, Any]], params: Sequence[str]) -> list[str]:
    """The swept parameters that change the area proxy: two points differing only in one of
    them have different ``area_bits``."""
    out = []
    for p in params:
        groups: dict[tuple, set[Any]] = {}
        for r in records:
            if r["status"] != "ok":
                continue
            rest = tuple(repr(r["params"].get(o)) for o in params if o != p)
            groups.setdefault(rest, set()).add(r["figures"].get("area_bits"))
        if any(len(areas) > 1 for areas in groups.values()):
            out.append(p)
    return out


def _pareto_panel(ax: Any, records: Sequence[dict[str, Any]], params: Sequence[str]) -> None:
    """Cycles vs area bits; one Pareto front per workload (the points that differ only in the
    parameters that change the area, so each front compares designs on the same work)."""
    ok = [r for r in records if r["status"] == "ok" and r["figures"].get("cycles")]
    design = design_params(ok, params)
    work = [p for p in params if p not in design]
    groups: dict[str, list[tuple[float, float]]] = {}
    for r in ok:
        label = " ".join(f"{p}={r['params'][p]}" for p in work) or "all points"
        groups.setdefault(label, []).append((float(r["figures"]["area_bits"]),
                                             float(r["figures"]["cycles"])))
    every = [pt for pts in groups.values() for pt in pts]
    ax.scatter([p[0] for p in every], [p[1] for p in every], s=14, alpha=0.4, color="0.5")
    for label, pts in groups.items():
        front = pareto_front(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], marker="o", markersize=3,
                linewidth=1, label=label)
    if every and max(p[1] for p in every) > 10 * min(p[1] for p in every):
        ax.set_yscale("log")
    if every and max(p[0] for p in every) > 10 * min(p[0] for p in every):
        ax.set_xscale("log", base=2)
    ax.set_title(f"Pareto fronts over {', '.join(design) or 'no area-changing parameter'}",
                 fontsize=9)
    if len(groups) <= 16:
        ax.legend(fontsize=6, ncol=2)


def plot(records: Sequence[dict[str, Any]], params: Sequence[str], path: str | os.PathLike[str],
         title: str = "", x: str | None = None) -> Path:
    """Write a PNG: efficiency vs parameter ``x`` (default: the first swept one), one line per
    combination of the other swept parameters; and cycles vs area bits with a Pareto front per
    workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not params:
        raise ValueError("Plotting a sweep needs at least one swept parameter, not none")
    x = x or params[0]
    if x not in params:
        raise ValueError(f"Plot parameter must be one of the swept ones ({', '.join(params)}), "
                         f"not {x!r}")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    series = _series(records, x, [p for p in params if p != x])
    colors = [plt.get_cmap("tab20")(i) for i in range(20)]
    for i, (label, pts) in enumerate(series.items()):
        xs = [str(v) for v, _ in pts]
        ax1.plot(xs, [e for _, e in pts], marker="o", label=label,
                 color=colors[i % len(colors)], linestyle=("-", "--", ":")[i // len(colors) % 3])
    ax1.set_xlabel(x)
    ax1.set_ylabel("efficiency (beats / cycle)")
    ax1.grid(True, alpha=0.3)
    if 1 < len(series) <= 24:
        ax1.legend(fontsize=6, ncol=2)
    _pareto_panel(ax2, records, params)
    ax2.set_xlabel("area proxy (storage bits)")
    ax2.set_ylabel("cycles")
    ax2.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
