"""Build and launch cocotb benches on Icarus or Verilator from pytest (shared by the HDL benches).

The API:

- :func:`require_simulator` skips the calling test when ``$SIM``'s simulator (``icarus``, the
  default, or ``verilator``) is not installed (:func:`require_icarus`,
  :func:`require_verilator`);
- :func:`test_seed` gives a test's seed (``SIM_SEED`` in the environment overrides it);
- :func:`run_cocotb` builds a Verilog top once per file (cached under ``build/sim/_build``,
  or by content under ``build/sim/_build_verilator``) and runs one cocotb test of a
  ``tb_*`` module of :mod:`mncore_hdl.testing.cocotb_benches` against it, leaving its VCD at
  ``build/sim/<test_name>/<test_name>.vcd``; it fails when the cocotb test fails. With
  ``MNCORE_COVERAGE=DIR`` in the environment, each test writes its functional coverage under
  ``DIR/functional`` and, on Verilator, its line and toggle counts to
  ``DIR/verilator/<test_name>.dat`` (:mod:`mncore_hdl.tooling.coverage`).

Typical launcher::

    def test_something():
        require_simulator()
        verilog = export_memctrl(CONFIG, ports=3, build_dir=BUILD_ROOT / "verilog")
        run_cocotb(verilog, "memctrl", "tb_memctrl", "something", seed=test_seed("something"))
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mncore_hdl import paths
from mncore_hdl.settings import HDL
from mncore_hdl.tooling.files import build_lock
from mncore_hdl.tooling.icarus import icarus_vcd_runner

__all__ = ["BENCHES", "BUILD_ROOT", "SIMULATORS", "bench_module", "require_icarus",
           "require_simulator", "require_verilator", "run_cocotb", "simulator", "test_seed"]

#: Every simulation product goes below this folder (``mncore_hdl.paths``).
BUILD_ROOT = paths.BUILD_ROOT / "sim"
#: The package of the cocotb coroutine modules (``tb_*``), which ship with the package.
BENCHES = "mncore_hdl.testing.cocotb_benches"


def bench_module(name: str) -> str:
    """The module cocotb imports for bench ``name``: a bare name (``"tb_memctrl"``) is one of
    :data:`BENCHES`; a dotted name is taken as it is."""
    return name if "." in name else f"{BENCHES}.{name}"


#: The simulator of the HDL benches: ``$SIM`` (cocotb's convention), ``icarus`` by default.
SIMULATORS = ("icarus", "verilator")


def simulator() -> str:
    """``$SIM``, checked: the simulator :func:`run_cocotb` uses."""
    return HDL["SIM"].get()  # a SettingError (a ValueError) names the simulators


def require_simulator() -> None:
    """Skip the calling test (with the reason) when ``$SIM``'s simulator is not installed."""
    if simulator() == "verilator":
        require_verilator()
    else:
        require_icarus()


def require_verilator() -> None:
    """Skip the calling test (with the reason) when Verilator cannot build a model here."""
    from mncore_hdl.tooling.verilator import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip("Verilator cannot run here; missing: " + "; ".join(missing))


def require_icarus() -> None:
    """Skip the calling test (with the reason) when ``iverilog``/``vvp`` are not on PATH."""
    for tool in ("iverilog", "vvp"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (Icarus Verilog) is not installed; "
                        "install it with: sudo apt-get install -y iverilog")


def test_seed(name: str) -> int:
    """The seed of test ``name``: ``$SIM_SEED`` if set, else a stable hash of the name."""
    seed = HDL["SIM_SEED"].get()
    if seed is not None:
        return seed
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


test_seed.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def run_cocotb(verilog: str | os.PathLike[str], toplevel: str, test_module: str, testcase: str,
               *, seed: int, test_name: str | None = None,
               extra_env: Mapping[str, str] | None = None, waves: bool = True) -> Path:
    """Run cocotb test ``testcase`` of module ``test_module`` (in ``sim/``) on ``verilog``.

    Parameters
    ----------
    verilog : path-like
        The Verilog file (e.g. from :func:`mncore_hdl.tooling.verilog.export_memctrl`). Its compiled
        simulation is cached per file, so every test of one configuration shares one build.
    toplevel : str
        The top module name.
    test_module, testcase : str
        Python module holding the cocotb coroutines (:func:`bench_module`), and the test to
        run.
    seed : int
        Random seed (``cocotb.RANDOM_SEED`` in the bench); printed for reproduction.
    test_name : str, optional
        Names the output folder and the VCD; defaults to ``testcase``.
    extra_env : mapping, optional
        Environment variables for the bench (its parameters).
    waves : bool
        Dump a VCD at ``build/sim/<test_name>/<test_name>.vcd``.

    Returns
    -------
    pathlib.Path
        The test's output folder.
    """
    from cocotb_tools.check_results import get_results

    from mncore_hdl.tooling.coverage import coverage_dir, line_data_path

    verilog = Path(verilog).resolve()
    test_name = test_name or testcase
    print(f"[sim] {test_name}: seed={seed} (rerun with SIM_SEED={seed})")
    key = hashlib.sha256(str(verilog).encode()).hexdigest()[:12]
    build_dir = BUILD_ROOT / "_build" / f"{toplevel}-{key}"
    test_dir = BUILD_ROOT / test_name
    test_dir.mkdir(parents=True, exist_ok=True)
    vcd = test_dir / f"{test_name}.vcd"
    if vcd.exists():
        vcd.unlink()

    env = dict(extra_env or {})
    plusargs = [f"+dumpfile_path={vcd}"] if waves else []
    cov_dir = coverage_dir()
    if cov_dir is not None:
        env["MNCORE_COVERAGE"], env["MNCORE_COVERAGE_NAME"] = str(cov_dir), test_name
    if simulator() == "verilator":
        runner, build_dir, test_args = _verilator(verilog, toplevel, vcd, cov_dir is not None)
        if cov_dir is not None:
            plusargs.append(f"+verilator+coverage+file+{line_data_path(cov_dir, test_name)}")
    else:
        runner, test_args = icarus_vcd_runner(), []
        build_dir.mkdir(parents=True, exist_ok=True)
        with build_lock(build_dir / ".lock"):  # one compile at a time per build folder
            runner.build(sources=[verilog], hdl_toplevel=toplevel, build_dir=build_dir,
                         waves=True, timescale=("1ns", "1ps"))
    pythonpath = os.pathsep.join([str(paths.SOURCE_ROOT), os.environ.get("PYTHONPATH", "")])
    env["PYTHONPATH"] = pythonpath
    results = runner.test(
        hdl_toplevel=toplevel, hdl_toplevel_lang="verilog", test_module=bench_module(test_module),
        testcase=testcase, seed=seed,
        test_dir=test_dir, build_dir=build_dir, waves=waves,
        test_args=test_args if waves else [],
        plusargs=plusargs, extra_env=env,
        results_xml=str(test_dir / "results.xml"))
    num_tests, num_failed = get_results(Path(results))
    if num_tests == 0 or num_failed:
        pytest.fail(f"{test_name}: {num_failed} of {num_tests} cocotb tests failed "
                    f"(seed={seed}; log above, VCD {vcd})")
    if waves and (not vcd.exists() or vcd.stat().st_size == 0):
        pytest.fail(f"{test_name}: no VCD written at {vcd}")
    sys.stdout.flush()
    return test_dir


def _verilator(verilog: Path, toplevel: str, vcd: Path,
               coverage: bool = False) -> tuple[Any, Path, list[str]]:
    """The cocotb runner, the cached model of ``toplevel`` (counting coverage if asked) and its
    wave arguments.

    The benches read and write the top's ports and the backing store ``mem`` through VPI, so
    those are public (all the top's signals, and every ``mem``); the clock is cocotb's.
    """
    from cocotb_tools.runner import get_runner

    from mncore_hdl.tooling.verilator import build_model, verilator_env

    public = [("rw", toplevel, "*"), ("rw", "*", "mem")]
    build_dir = build_model([verilog], toplevel, public, BUILD_ROOT / "_build_verilator",
                            say=lambda s: print(f"[sim] {s}", flush=True),
                            timescale="1ns/1ps", coverage=coverage)
    os.environ.update(verilator_env())
    return get_runner("verilator"), build_dir, ["--trace-file", str(vcd)]
