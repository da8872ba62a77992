"""Verilog export: named after the component, ports from the signature, metadata, cache."""

import json

import pytest
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.verilog import export_memctrl, export_verilog

TINY = MNCORE2_SIM.replace(
    banks=2, row_lw=16, sim_window_lw=64,
    timing=DramTiming(cl=3, trcd=2, trp=2, tras=5, twr=2, trefi=100, trfc=10, burst_length=8))


def test_export_names_ports_metadata_and_cache(tmp_path):
    v = export_memctrl(TINY, 2, build_dir=tmp_path, name="mc_tiny")
    text = v.read_text()
    assert v.name == "mc_tiny.v"
    assert "module mc_tiny(" in text
    for port in ("ports__1__req__payload", "ports__0__rdata__valid", "cmd_kind", "csr_rdata"):
        assert port in text
    assert "initial #0" in text                      # combinational blocks run at time 0
    meta = json.loads(v.with_suffix(".json").read_text())
    assert meta["ports"] == 2 and meta["config"] == TINY.to_dict()
    mtime = v.stat().st_mtime_ns

    assert export_memctrl(TINY, 2, build_dir=tmp_path, name="mc_tiny") == v
    assert v.stat().st_mtime_ns == mtime             # served from the cache
    assert export_memctrl(TINY, 1, build_dir=tmp_path, name="mc_tiny") != v


def test_export_validation(tmp_path):
    with pytest.raises(ValueError, match=r"^Module name must be a Verilog identifier, not '1x'$"):
        export_verilog(lambda: None, "1x", {}, tmp_path)
