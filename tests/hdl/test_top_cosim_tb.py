"""The testbench top ``cosim_tb`` and the Verilator build helpers, without a simulator."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.tooling.verilator import control_file, missing_tools
from mncore_hdl.top.cosim_tb import TB_MODULE, cosim_tb_verilog, public_signals, top_ports

_TOP = """\
module cosim_top(clk, rst, host__0__req__valid, host__0__req__payload, host__0__req__ready,
  host__0__wdata__valid, host__0__wdata__payload, host__0__wdata__ready,
  host__0__rdata__ready, host__0__rdata__valid, host__0__rdata__payload, busy);
  input clk;
  input rst;
  input host__0__req__valid;
  input [29:0] host__0__req__payload;
  output host__0__req__ready;
  input host__0__wdata__valid;
  input [71:0] host__0__wdata__payload;
  output host__0__wdata__ready;
  input host__0__rdata__ready;
  output host__0__rdata__valid;
  output [64:0] host__0__rdata__payload;
  output busy;
endmodule

module other(a);
  input a;
endmodule
"""


def test_top_ports_reads_only_the_named_module():
    ports = {p.name: (p.direction, p.width) for p in top_ports(_TOP)}
    assert ports["host__0__req__payload"] == ("input", 30)
    assert ports["host__0__rdata__payload"] == ("output", 65)
    assert "a" not in ports


def test_top_ports_names_a_missing_module():
    with pytest.raises(ValueError, match="module 'nope' not found"):
        top_ports(_TOP, "nope")


def test_testbench_has_only_a_clock_port_and_keeps_every_name():
    text = cosim_tb_verilog(_TOP, dataclasses.replace(MNCORE2_SIM, groups=1))
    assert f"module {TB_MODULE}(clk);" in text
    assert "  reg host__0__req__valid = 0;" in text  # an input becomes a VPI-written register
    assert "  wire rst = reset_left != 0;" in text  # reset comes from the testbench itself
    assert "  wire busy;" in text
    assert "cosim_tb_dma" in text and "$readmemh" in text and "$writememh" in text
    assert ".host__0__req__valid(host__0__req__valid_m)" in text  # muxed with the DMA engine


def test_public_signals_write_inputs_and_read_outputs():
    public = public_signals(_TOP)
    assert ("rw", TB_MODULE, "host__0__req__valid") in public
    assert ("rd", TB_MODULE, "busy") in public
    assert ("rd", TB_MODULE, "rst") in public and ("rw", TB_MODULE, "rst") not in public
    assert ("rw", TB_MODULE, "dma_go") in public


def test_control_file_lists_public_signals():
    text = control_file([("rw", "cosim_tb", "*"), ("rd", "*", "mem")])
    assert text.startswith("`verilator_config")
    assert 'public_flat_rw -module "cosim_tb" -var "*"' in text
    assert 'public_flat_rd -module "*" -var "mem"' in text


def test_control_file_rejects_an_unknown_access():
    with pytest.raises(ValueError, match="VPI access must be 'rw' or 'rd', not 'w'"):
        control_file([("w", "cosim_tb", "x")])


def test_missing_tools_is_a_list_of_instructions():
    for item in missing_tools():
        assert "install" in item


def _fake_profiled_build(tmp_path, write_profile: bool):
    from mncore_hdl.tooling import verilator as vt

    build = tmp_path / "cosim_tb-key"
    build.mkdir()
    (build / "Vtop.mk").write_text("# verilated\n")
    (build / "build.log").write_text("")
    steps: list[tuple[str, list[str]]] = []
    trained: list = []

    def step(what, cmd):
        steps.append((what, cmd))
        folder = Path(cmd[0])
        (folder / "cosim_tb").write_text("exe")

    def compile_(folder, opt, ldflags=""):
        return [str(folder), opt, ldflags]

    def train(folder):
        trained.append(folder)
        assert (folder / "Vtop.mk").exists() and not (folder / "build.log").exists()
        if write_profile:
            (folder / "Vtop__ALL.gcda").write_text("profile")

    with open(build / "build.log", "w") as log:
        vt.build_with_profile(build, train, step, compile_, log, lambda s: None)
    return build, steps, trained


def test_profile_guided_build_trains_the_instrumented_model_then_uses_its_profile(tmp_path):
    from mncore_hdl.tooling.verilator import PGO_GENERATE, PGO_USE

    build, steps, trained = _fake_profiled_build(tmp_path, write_profile=True)
    assert trained == [build / "pgo"]
    (_, gen), (_, use) = steps
    assert gen == [str(build / "pgo"), f"-O2 {PGO_GENERATE}", PGO_GENERATE]
    assert use == [str(build), f"-O2 {PGO_USE}", ""]
    assert (build / "Vtop__ALL.gcda").read_text() == "profile"
    assert not (build / "pgo").exists()  # the instrumented model never sits at build/cosim_tb


def test_profile_guided_build_refuses_a_training_run_that_wrote_no_profile(tmp_path):
    with pytest.raises(RuntimeError, match="wrote no profile"):
        _fake_profiled_build(tmp_path, write_profile=False)
