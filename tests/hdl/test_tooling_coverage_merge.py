"""mncore_hdl.tooling.coverage: Verilator counts and functional coverage merged, summarised."""

from __future__ import annotations

from mncore_hdl.tooling.coverage import (
    Source,
    merge_dat,
    merge_functional,
    read_dat,
    summarise_points,
    uncovered_ranges,
    write_dat,
)


def _key(kind: str, line: str, comment: str = "", spec: str = "") -> str:
    fields = {"page": f"v_{kind}/t", "f": "/b/t.v", "l": line, "o": comment, "h": "TOP.t"}
    if spec:
        fields["S"] = spec
    return "".join(f"\x01{k}\x02{v}" for k, v in fields.items())


def test_merge_dat_adds_counts_of_equal_points(tmp_path):
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    write_dat({_key("line", "3"): 2, _key("toggle", "1", "x"): 0}, a)
    write_dat({_key("line", "3"): 5, _key("line", "4"): 0}, b)
    merged = merge_dat([a, b])
    assert merged == {_key("line", "3"): 7, _key("toggle", "1", "x"): 0, _key("line", "4"): 0}
    kinds = sorted((p.kind, p.lines, p.count) for p in read_dat(merged))
    assert kinds == [("line", (3,), 7), ("line", (4,), 0), ("toggle", (1,), 0)]


def test_line_ranges_of_a_block_point():
    (point,) = read_dat({_key("line", "3", spec="3-5,8"): 1})
    assert point.lines == (3, 4, 5, 8)


def test_summary_per_amaranth_file():
    table = {1: Source("x.py", 10), 2: Source("x.py", 11), 3: Source("x.py", 12),
             4: Source("y.py", 1)}
    points = read_dat({_key("line", "1"): 4, _key("line", "2", spec="2-3"): 0,
                       _key("toggle", "1", "a[0]"): 1, _key("toggle", "4", "b[0]"): 0,
                       _key("toggle", "4", "b[1]"): 1})
    figures = summarise_points(points, {"/b/t.v": table})
    x, y = figures["x.py"], figures["y.py"]
    assert x.lines == {10: 4, 11: 0, 12: 0}
    assert round(x.line_pct, 1) == 33.3 and x.uncovered == [(11, 12)]
    assert (x.toggles_hit, x.toggles_total) == (1, 1)
    assert (x.points_hit, x.points_total, x.missed) == (1, 2, {11: 1})
    assert (y.toggles_hit, y.toggles_total, y.toggle_pct) == (1, 2, 50.0)


def test_uncovered_runs_skip_lines_without_points():
    assert uncovered_ranges({1: 0, 2: 0, 5: 0, 6: 3, 9: 0}) == [(1, 5), (9, 9)]


def test_merge_functional_adds_bins(tmp_path):
    one = tmp_path / "one.yml"
    two = tmp_path / "two.yml"
    one.write_text("top.a:\n  at_least: 1\n  bins:_hits:\n    RD: 2\n    WR: 0\n"
                   "  type: <class 'cocotb_coverage.coverage.CoverPoint'>\n"
                   "top:\n  size: 2\n  coverage: 1\n  cover_percentage: 50.0\n")
    two.write_text("top.a:\n  at_least: 1\n  bins:_hits:\n    RD: 0\n    WR: 1\n"
                   "  type: <class 'cocotb_coverage.coverage.CoverPoint'>\n"
                   "top.x:\n  at_least: 1\n  bins:_hits:\n    (1, 2): 0\n"
                   "  type: <class 'cocotb_coverage.coverage.CoverCross'>\n")
    merged = merge_functional([one, two], tmp_path / "merged.yml")
    assert set(merged) == {"top.a", "top.x"}
    assert merged["top.a"].bins == {"RD": 2, "WR": 1} and merged["top.a"].pct == 100.0
    assert merged["top.x"].kind == "cross" and merged["top.x"].unreached == ["(1, 2)"]
    again = merge_functional([tmp_path / "merged.yml"])
    assert again["top.a"].bins == merged["top.a"].bins and again["top.x"].kind == "cross"
