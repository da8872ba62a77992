"""The Verilator models' C++ compiler choice (g++ or clang++), without building a model."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from mncore_hdl.settings import SettingError
from mncore_hdl.tooling.verilator_cxx import Cxx, find_clang, model_compiler


def _tools(folder: Path, *names: str) -> str:
    """``folder`` holding executables ``names`` that print a version line; its PATH."""
    folder.mkdir(exist_ok=True)
    for name in names:
        tool = folder / name
        tool.write_text(f"#!/bin/sh\necho '{name} version 1.0'\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(folder)


def test_find_clang_takes_the_newest_clang_with_its_profdata(tmp_path):
    path = _tools(tmp_path / "bin", "clang++-14", "llvm-profdata-14", "clang++-16",
                  "llvm-profdata-16", "clang++-17")  # 17 has no llvm-profdata: not usable
    cxx, profdata = find_clang(path)
    assert (Path(cxx).name, Path(profdata).name) == ("clang++-16", "llvm-profdata-16")
    assert find_clang(_tools(tmp_path / "plain", "clang++", "llvm-profdata")) == (
        str(tmp_path / "plain" / "clang++"), str(tmp_path / "plain" / "llvm-profdata"))
    assert find_clang(_tools(tmp_path / "none", "clang++")) is None


def test_the_setting_forces_the_compiler(tmp_path, monkeypatch):
    gxx = _tools(tmp_path / "gcc", "g++")
    both = _tools(tmp_path / "both", "clang++-16", "llvm-profdata-16")
    monkeypatch.setenv("PATH", os.pathsep.join([gxx, both]))
    monkeypatch.delenv("MNCORE_VERILATOR_CXX", raising=False)
    assert model_compiler().kind == "clang"  # found: chosen
    monkeypatch.setenv("MNCORE_VERILATOR_CXX", "gcc")
    assert model_compiler() == Cxx("gcc", "g++", "g++ version 1.0")
    monkeypatch.setenv("PATH", gxx)
    monkeypatch.delenv("MNCORE_VERILATOR_CXX")
    assert model_compiler().kind == "gcc"  # not found: g++
    monkeypatch.setenv("MNCORE_VERILATOR_CXX", "clang")
    with pytest.raises(RuntimeError, match="no clang"):
        model_compiler()
    monkeypatch.setenv("MNCORE_VERILATOR_CXX", "icc")
    with pytest.raises(SettingError, match="MNCORE_VERILATOR_CXX must be one of gcc, clang"):
        model_compiler()


def test_each_compiler_has_its_own_cache_key_and_profile_options(tmp_path):
    gcc = Cxx("gcc", "g++", "g++ 12")
    clang = Cxx("clang", "/usr/bin/clang++-16", "clang 16", "/usr/bin/llvm-profdata-16")
    assert len({gcc.key(), clang.key(), Cxx("gcc", "g++", "g++ 13").key()}) == 3
    assert gcc.make_vars() == []
    assert "CXX=/usr/bin/clang++-16" in clang.make_vars()
    assert clang.pgo_generate(tmp_path) == f"-fprofile-instr-generate={tmp_path}/%p.profraw"
    assert clang.pgo_use(tmp_path) == f"-fprofile-instr-use={tmp_path}/model.profdata"


def test_clang_profiles_are_merged_into_the_build_folder(tmp_path):
    scratch, build = tmp_path / "pgo", tmp_path
    scratch.mkdir()
    (scratch / "12.profraw").write_text("raw")
    merger = _tools(tmp_path / "bin", "llvm-profdata")
    # a stand-in for llvm-profdata that writes what it was asked for
    Path(merger, "llvm-profdata").write_text('#!/bin/sh\necho "$@" > "$3"\n')
    Cxx("clang", "clang++", "clang 16", str(Path(merger, "llvm-profdata"))).keep_profile(
        scratch, build)
    assert (build / "model.profdata").read_text().split() == [
        "merge", "-o", str(build / "model.profdata"), str(scratch / "12.profraw")]
    with pytest.raises(RuntimeError, match=r"wrote no profile \(\*\.profraw\)"):
        Cxx("clang", "clang++", "clang 16", "llvm-profdata").keep_profile(tmp_path / "bin",
                                                                          build)
