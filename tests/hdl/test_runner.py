"""mncore_hdl.testing.runner: which module cocotb imports for a bench, and that every bench
ships inside the package (so an installed wheel runs the sweeps' RTL points)."""

from __future__ import annotations

import importlib.util

import pytest
from mncore_hdl.paths import PACKAGE_DIR
from mncore_hdl.testing.runner import BENCHES, bench_module


def test_a_bare_bench_name_is_a_module_of_the_benches_package():
    assert bench_module("tb_memctrl") == f"{BENCHES}.tb_memctrl"
    assert bench_module("my_pkg.tb_other") == "my_pkg.tb_other"


@pytest.mark.parametrize("name", ["tb_memctrl", "tb_memctrl_bench", "tb_converter",
                                  "tb_converter_bench", "tb_coverage"])
def test_each_bench_module_is_in_the_package(name):
    spec = importlib.util.find_spec(bench_module(name))  # found, not imported (cocotb only)
    assert spec is not None and spec.origin is not None
    assert spec.origin.startswith(str(PACKAGE_DIR / "testing" / "cocotb_benches"))
