"""``bench_memctrl --litedram`` on tiny streams: LiteDRAM moves the beats our controller moves.

LiteDRAM and migen come with the ``test`` extra (a checkout installed without it skips this
file). The first run Verilates LiteDRAM (about a minute and a half; cached under
build/litedram/).
"""

import pytest

pytest.importorskip("litedram")
pytest.importorskip("migen")

from mncore_hdl.testing import litedram_model as model  # noqa: E402
from mncore_hdl.testing import memctrl_bench as bench  # noqa: E402
from mncore_hdl.tooling.verilator import missing_tools  # noqa: E402

#: (pattern, LW per port): a sequential row per port, and random bursts with both directions.
CASES = (("read/1", 256), ("rnd r/w/3", 48))


def test_streams_follow_our_generators():
    """The native commands per port have our generators' directions, beat for beat."""
    for name, lw in CASES:
        case = bench.make_case(bench.CONFIG, *bench.split_name(name), lw)
        got = bench.run_amaranth(bench.FR_FCFS, case, ("read_beats", "write_beats"))["counters"]
        streams = model.port_streams(bench.CONFIG, case)
        assert len(streams) == len(case["gens"])
        for p, s in enumerate(streams):
            reads = sum(not w for _, w in s.commands)
            assert (reads, s.beats - reads) == (got[(p, "read_beats")],
                                                got[(p, "write_beats")]), (name, p)
        if name.startswith("rnd"):
            assert 0 < reads < s.beats  # both directions really occur


def test_litedram_column_moves_the_same_beats():
    if missing_tools():
        pytest.skip(f"Verilator missing: {', '.join(missing_tools())}")
    for name, lw in CASES:
        ld = bench.litedram_results(bench.CONFIG, lw, [name], "verilator")[name]
        p = bench.split_name(name)[1]
        assert ld["beats"] == lw * p
        assert ld["violations"] == 0  # the PHY model's timing checker (no refresh this short)
        # one beat a cycle at most, and a row miss at least before the first read returns
        assert ld["cycles"] >= ld["beats"] + bench.CONFIG.timing.trcd + bench.CONFIG.timing.cl


def test_bad_case_is_refused():
    case = bench.make_case(bench.CONFIG, "read", 1, 128)  # less than a row: no request
    with pytest.raises(ValueError, match="no port with requests"):
        model.run_verilated(None, bench.CONFIG, case)
