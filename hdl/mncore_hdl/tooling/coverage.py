"""Coverage of the sim benches: where runs write it, Verilog-to-Amaranth mapping, merges, summary.

A run with ``MNCORE_COVERAGE=DIR`` in the environment (see :func:`coverage_dir`) leaves:

- ``DIR/verilator/<test>.dat``: Verilator's line and toggle counts of one test (only with
  ``SIM=verilator``; the model is built with ``--coverage-line --coverage-toggle``, from a
  Verilog that keeps Amaranth's ``src`` attributes);
- ``DIR/functional/<test>.yml``: the cocotb-coverage database of one test (both simulators).

This module reads those files: :func:`src_map` maps each Verilog line to the Amaranth
``file.py:line`` it came from, :func:`read_dat` / :func:`merge_dat` read and add up Verilator's
counts, :func:`translate_lcov` rewrites a Verilog lcov file onto Amaranth sources,
:func:`summarise_points` gives line and toggle figures per Amaranth file, and
:func:`merge_functional` adds up functional coverage. ``bench/coverage.py`` drives it all.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import CHECKOUT, SOURCE_ROOT
from ..settings import HDL

__all__ = ["COVERAGE_ENV", "coverage_dir", "wants_src", "line_data_path", "functional_path",
           "Source", "src_map", "CoverCount", "read_dat", "merge_dat", "write_dat",
           "translate_lcov", "FileFigures", "summarise_points", "uncovered_ranges",
           "merge_functional", "FunctionalItem", "lcov_text"]

#: The environment variable that turns coverage on and names its output folder.
COVERAGE_ENV = HDL["MNCORE_COVERAGE"].name
_REPO = CHECKOUT or SOURCE_ROOT.parent


def coverage_dir() -> Path | None:
    """``$MNCORE_COVERAGE`` as an absolute folder (created), or None when coverage is off."""
    value = os.environ.get(COVERAGE_ENV)
    if not value:
        return None
    path = Path(value).resolve()
    path.mkdir(parents=True, exist_ok=True)
    # Absolute from here on: a bench runs in its own folder and inherits this environment.
    os.environ[COVERAGE_ENV] = str(path)
    return path


def wants_src() -> bool:
    """True when exports should keep ``src`` attributes: coverage on, simulator Verilator."""
    return HDL["MNCORE_COVERAGE"].is_set() and HDL["SIM"].get() == "verilator"


def line_data_path(folder: Path, test_name: str) -> Path:
    """Where test ``test_name`` writes its Verilator counts under coverage folder ``folder``."""
    out = Path(folder) / "verilator"
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{test_name}.dat"


def functional_path(folder: Path, test_name: str) -> Path:
    """Where test ``test_name`` writes its functional coverage under ``folder``."""
    out = Path(folder) / "functional"
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{test_name}.yml"


# -- Verilog lines -> Amaranth sources ---------------------------------------------------------

@dataclass(frozen=True, order=True)
class Source:
    """One Amaranth source line: ``file`` relative to the checkout when inside it."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_SRC_ATTR = re.compile(r'\(\*\s*src\s*=\s*"([^"]*)"\s*\*\)')
_ATTR_ONLY = re.compile(r"^\s*(\(\*.*?\*\)\s*)+$")
_DECL = re.compile(r"^\s*(?:input|output|inout|wire|reg|integer)\b[^;]*?(\\\S+|[A-Za-z_][\w$]*)"
                   r"\s*(?:\[[^\]]*\]\s*)?(?:=[^;]*)?;")
_ASSIGN = re.compile(r"^\s*assign\s+(\\\S+|[A-Za-z_][\w$]*)")
_IDENT = re.compile(r"\\\S+|[A-Za-z_][\w$]*")
_KEYWORDS = frozenset("""always assign begin case casez default else end endcase endmodule if
    initial input module output posedge negedge reg wire integer for""".split())


def _parse_src(value: str, root: Path = _REPO) -> Source | None:
    """The first ``path:line`` of a ``src`` attribute value, this package's entries first."""
    entries = []
    for part in value.split("|"):
        path, _, pos = part.rpartition(":")
        digits = re.match(r"\d+", pos)
        if path and digits:
            entries.append((path, int(digits[0])))
    if not entries:
        return None
    ours = [e for e in entries if "/mncore_hdl/" in e[0]]
    path, number = (ours or entries)[0]
    try:
        path = str(Path(path).resolve().relative_to(root))
    except ValueError:
        pass
    return Source(path, number)


def _signal_sources(lines: list[str], root: Path) -> dict[str, Source]:
    """Each named signal's source: the operator that drives it (an ``assign``), else its
    declaration."""
    decl: dict[str, Source] = {}
    drive: dict[str, Source] = {}
    pending: Source | None = None
    for text in lines:
        if _ATTR_ONLY.match(text):
            found = _SRC_ATTR.search(text)
            pending = (_parse_src(found[1], root) if found else None) or pending
            continue
        inline = _SRC_ATTR.search(text)
        own = pending or (_parse_src(inline[1], root) if inline else None)
        if (mt := _ASSIGN.match(text)) and (inline or own):
            drive[mt[1]] = (_parse_src(inline[1], root) if inline else None) or own  # type: ignore[assignment]
        elif (mt := _DECL.match(text)) and own:
            decl.setdefault(mt[1], own)
        pending = None
    return {**decl, **drive}


def src_map(verilog: str, root: Path = _REPO) -> dict[int, Source]:
    """Verilog line number (1-based) -> the Amaranth source line it came from.

    A line takes, in order: a ``src`` attribute written on it (Amaranth puts one on each
    operator) or on the lines just above it; else the source of the first signal it names that
    has one (so ``if (\\$12)`` inside a combinational process maps to the comparison driving
    ``$12``); else the last source seen in its module. Lines before any source map to nothing.

    Parameters
    ----------
    verilog : str
        Verilog text exported with ``emit_src=True``.
    root : Path
        Checkout the source paths are made relative to (paths outside it stay absolute).

    Returns
    -------
    dict of int to Source
    """
    lines = verilog.splitlines()
    signals = _signal_sources(lines, root)
    out: dict[int, Source] = {}
    pending: Source | None = None
    last: Source | None = None
    for number, text in enumerate(lines, 1):
        if _ATTR_ONLY.match(text):
            found = _SRC_ATTR.search(text)
            pending = (_parse_src(found[1], root) if found else None) or pending
            continue
        if text.startswith("module ") or text.startswith("endmodule"):
            last = None
        inline = _SRC_ATTR.search(text)
        here = pending or (_parse_src(inline[1], root) if inline else None)
        if here is None:
            names = (n for n in _IDENT.findall(_SRC_ATTR.sub("", text)) if n not in _KEYWORDS)
            here = next((signals[n] for n in names if n in signals), None)
        here = here or last
        if here is not None:
            out[number] = here
        last, pending = here, None
    return out


# -- Verilator's coverage.dat ------------------------------------------------------------------

@dataclass(frozen=True)
class CoverCount:
    """One Verilator coverage point with its count: ``kind`` is ``line``, ``toggle``, ..."""

    kind: str
    file: str
    lines: tuple[int, ...]
    comment: str
    count: int


_DAT_LINE = re.compile(r"^C '(.*)' (\d+)\s*$")


def _fields(key: str) -> dict[str, str]:
    out = {}
    for item in key.split("\x01"):
        name, sep, value = item.partition("\x02")
        if sep:
            out[name] = value
    return out


def _line_spec(spec: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def merge_dat(paths: Iterable[str | os.PathLike[str]]) -> dict[str, int]:
    """Verilator coverage files added up: raw point key -> total count (what
    ``verilator_coverage --write`` does)."""
    total: dict[str, int] = defaultdict(int)
    for path in paths:
        for text in Path(path).read_text(errors="replace").splitlines():
            if mt := _DAT_LINE.match(text):
                total[mt[1]] += int(mt[2])
    return dict(total)


def write_dat(points: Mapping[str, int], path: str | os.PathLike[str]) -> None:
    """Write raw points (from :func:`merge_dat`) as a Verilator coverage file."""
    body = "".join(f"C '{key}' {count}\n" for key, count in points.items())
    Path(path).write_text("# SystemC::Coverage-3\n" + body)


def read_dat(points: Mapping[str, int] | str | os.PathLike[str]) -> list[CoverCount]:
    """The points of a coverage file (or of :func:`merge_dat`'s result), decoded."""
    if not isinstance(points, Mapping):
        points = merge_dat([points])
    out = []
    for key, count in points.items():
        f = _fields(key)
        page = f.get("page", "")
        kind = page.split("/")[0].removeprefix("v_") if page else f.get("t", "")
        lines = _line_spec(f["S"]) if f.get("S") else _line_spec(f.get("l", ""))
        out.append(CoverCount(kind, f.get("f", ""), lines, f.get("o", ""), count))
    return out


# -- figures per Amaranth file -----------------------------------------------------------------

@dataclass
class FileFigures:
    """Line and toggle coverage of one Amaranth source file."""

    lines: dict[int, int]       # instrumented Amaranth line -> hits (summed over Verilog)
    toggles_total: int = 0      # Verilator toggle points whose signal is declared here
    toggles_hit: int = 0
    points_total: int = 0       # Verilator line points (blocks, branches, case arms) here
    points_hit: int = 0
    #: Amaranth line -> how many of its Verilog line points were never reached
    missed: dict[int, int] = field(default_factory=dict)

    @property
    def point_pct(self) -> float:
        return 100.0 * self.points_hit / self.points_total if self.points_total else 100.0

    @property
    def line_pct(self) -> float:
        if not self.lines:
            return 100.0
        return 100.0 * sum(1 for n in self.lines.values() if n) / len(self.lines)

    @property
    def toggle_pct(self) -> float:
        return 100.0 * self.toggles_hit / self.toggles_total if self.toggles_total else 100.0

    @property
    def uncovered(self) -> list[tuple[int, int]]:
        return uncovered_ranges(self.lines)


def summarise_points(points: Iterable[CoverCount],
                     maps: Mapping[str, Mapping[int, Source]]) -> dict[str, FileFigures]:
    """Amaranth file -> its line, point and toggle figures.

    Parameters
    ----------
    points : iterable of CoverCount
        Verilator points (:func:`read_dat`).
    maps : mapping of str to src_map result
        Each Verilog file's :func:`src_map`, keyed by the path the points name. Points of a
        file without a map, or on a line that maps to nothing, are left out.

    Returns
    -------
    dict of str to FileFigures
        Keyed by the Amaranth file (relative to the checkout when inside it).
    """
    out: dict[str, FileFigures] = {}
    for point in points:
        table = maps.get(point.file)
        if table is None or point.kind not in ("line", "toggle"):
            continue
        sources = {table[n] for n in point.lines if n in table}
        for src in sources:
            fig = out.setdefault(src.file, FileFigures({}))
            if point.kind == "line":
                fig.lines[src.line] = fig.lines.get(src.line, 0) + point.count
            else:
                fig.toggles_total += 1
                fig.toggles_hit += point.count > 0
        if point.kind == "line" and sources:  # each point once, at its first line's source
            first = table.get(point.lines[0]) or min(sources)
            fig = out[first.file]
            fig.points_total += 1
            fig.points_hit += point.count > 0
            if not point.count:
                fig.missed[first.line] = fig.missed.get(first.line, 0) + 1
    return out


def uncovered_ranges(lines: Mapping[int, int]) -> list[tuple[int, int]]:
    """Runs ``(first, last)`` of instrumented lines with no hits; lines that are not
    instrumented do not break a run."""
    out: list[tuple[int, int]] = []
    start = prev = None
    for number in sorted(lines):
        if lines[number]:
            if start is not None:
                out.append((start, prev))  # type: ignore[arg-type]
            start = None
            continue
        start = number if start is None else start
        prev = number
    if start is not None:
        out.append((start, prev))  # type: ignore[arg-type]
    return out


def translate_lcov(info: str, maps: Mapping[str, Mapping[int, Source]]) -> str:
    """An lcov tracefile of Verilog files rewritten onto Amaranth sources.

    Each ``DA:line,count`` of a mapped Verilog file is credited to its Amaranth line (counts of
    one Amaranth line add up); records of files without a map pass through unchanged. Branch
    records of mapped files are dropped (a Verilog branch has no Amaranth twin)."""
    per_file: dict[str, dict[int, int]] = defaultdict(dict)
    kept: list[str] = []
    record: list[str] = []
    table: Mapping[int, Source] | None = None
    for text in info.splitlines():
        if text.startswith("SF:"):
            table, record = maps.get(text[3:]), [text]
        elif text == "end_of_record":
            if table is None:
                kept.extend([*record, text])
            table, record = None, []
        elif table is None:
            record.append(text)
        elif text.startswith("DA:"):
            number, count = (int(v) for v in text[3:].split(",")[:2])
            if (src := table.get(number)) is not None:
                lines = per_file[src.file]
                lines[src.line] = lines.get(src.line, 0) + count
    out = list(kept)
    for name in sorted(per_file):
        lines = per_file[name]
        out.append(f"SF:{_REPO / name if not Path(name).is_absolute() else name}")
        out.extend(f"DA:{n},{lines[n]}" for n in sorted(lines))
        out += [f"LF:{len(lines)}", f"LH:{sum(1 for c in lines.values() if c)}",
                "end_of_record"]
    return "\n".join(out) + "\n"


# -- functional coverage (cocotb-coverage YAML) ------------------------------------------------

@dataclass
class FunctionalItem:
    """One coverpoint or cross: hits per bin, and the hits a bin needs to count as covered."""

    bins: dict[str, int]
    at_least: int = 1
    kind: str = "point"

    @property
    def pct(self) -> float:
        hit = sum(1 for n in self.bins.values() if n >= self.at_least)
        return 100.0 * hit / len(self.bins) if self.bins else 100.0

    @property
    def unreached(self) -> list[str]:
        return [b for b, n in self.bins.items() if n < self.at_least]


def merge_functional(paths: Iterable[str | os.PathLike[str]],
                     out: str | os.PathLike[str] | None = None) -> dict[str, FunctionalItem]:
    """Add up cocotb-coverage YAML exports (``coverage_db.export_to_yaml``) bin by bin.

    Parameters
    ----------
    paths : iterable of path-like
        The per-test YAML files (or earlier merges).
    out : path-like, optional
        Where to write the merged database, in the same format.

    Returns
    -------
    dict of str to FunctionalItem
        The coverpoints and crosses (groups, which have no bins, are left out).
    """
    import yaml

    merged: dict[str, FunctionalItem] = {}
    for path in paths:
        data = yaml.safe_load(Path(path).read_text()) or {}
        for name, attrs in data.items():
            bins = attrs.get("bins:_hits")
            if bins is None:
                continue
            kind = "cross" if "cross" in str(attrs.get("type", "")).lower() else "point"
            item = merged.setdefault(name, FunctionalItem({}, int(attrs.get("at_least", 1)),
                                                          kind))
            for label, hits in bins.items():
                item.bins[str(label)] = item.bins.get(str(label), 0) + int(hits)
    if out is not None:
        dump = {name: {"type": item.kind, "at_least": item.at_least,
                       "cover_percentage": round(item.pct, 2), "bins:_hits": item.bins}
                for name, item in sorted(merged.items())}
        Path(out).write_text(yaml.safe_dump(dump, sort_keys=True))
    return merged


def lcov_text(figures: Mapping[str, FileFigures], root: Path = _REPO) -> str:
    """An lcov tracefile of Amaranth line coverage (``genhtml`` reads it with the sources)."""
    out = ["TN:mncore_sim"]
    for name in sorted(figures):
        lines = figures[name].lines
        path = name if Path(name).is_absolute() else str(root / name)
        out.append(f"SF:{path}")
        out.extend(f"DA:{n},{lines[n]}" for n in sorted(lines))
        out += [f"LF:{len(lines)}", f"LH:{sum(1 for c in lines.values() if c)}",
                "end_of_record"]
    return "\n".join(out) + "\n"
