"""The SymbiYosys runner: a true property passes, a false one fails with a VCD, bad args raise."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from amaranth.hdl import Elaboratable, Module, ResetSignal, Signal
from mncore_hdl.formal.primitives import AnySeq, Assert, Assume
from mncore_hdl.formal.runner import BOOLECTOR, DEFAULT_ENGINE, prove, submit, tools_available


class _Counter(Elaboratable):
    """A counter that stops at 9, with the claim that it stays below ``limit``."""

    def __init__(self, limit):
        self.limit = limit

    def elaborate(self, platform):
        m = Module()
        count = Signal(4)
        with m.If(AnySeq(1) & (count < 9)):
            m.d.sync += count.eq(count + 1)
        m.d.comb += [Assume(~ResetSignal()), Assert(count < self.limit)]
        return m


@pytest.fixture(autouse=True)
def _need_tools():
    missing = tools_available()
    if missing:
        pytest.skip(missing)


def test_true_property_passes_bmc_and_induction(tmp_path):
    assert prove(_Counter(10), tmp_path / "bmc", depth=12).passed
    assert prove(_Counter(10), tmp_path / "ind", mode="prove", depth=4).passed


def test_false_property_fails_with_a_trace(tmp_path):
    result = prove(_Counter(9), tmp_path, depth=12)
    assert result.status == "FAIL"
    assert result.vcd is not None and result.vcd.exists()


@pytest.mark.parametrize("engine", [DEFAULT_ENGINE, BOOLECTOR])
def test_each_solver_proves_and_refutes(tmp_path, monkeypatch, engine):
    missing = tools_available(engine)
    if missing:
        pytest.skip(missing)
    monkeypatch.chdir(tmp_path)   # a relative workdir: the solver shim must still be found
    assert prove(_Counter(10), "true", depth=12, engine=engine).passed
    assert prove(_Counter(9), "false", depth=12, engine=engine).status == "FAIL"
    assert f"[engines]\n{engine}\n" in (tmp_path / "true" / "proof.sby").read_text()


def test_submit_exports_before_it_returns_and_runs_in_the_pool(tmp_path):
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = submit(pool, _Counter(9), tmp_path, depth=12)
        # the RTLIL is written in this thread: a mutant may be patched in right away
        assert (tmp_path / "top.il").stat().st_size > 0
        result = future.result()
    assert result.status == "FAIL"
    assert result.vcd is not None and result.vcd.exists()


def test_extra_script_lines_reach_the_sby_file(tmp_path):
    assert prove(_Counter(10), tmp_path, depth=4, script=("memory_map",)).passed
    assert "prep -top top\nmemory_map\n" in (tmp_path / "proof.sby").read_text()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # rejected unelaborated
def test_bad_mode_and_depth_raise(tmp_path):
    with pytest.raises(ValueError, match="Mode must be one of bmc, prove, cover, not 'x'"):
        prove(_Counter(10), tmp_path, mode="x")
    with pytest.raises(ValueError, match="Depth must be a positive integer, not 0"):
        prove(_Counter(10), tmp_path, depth=0)
