"""The simulators' builds (``mlsdk/device/rtl/builds.py``): the sessions' per-process build
memo, and the cached Icarus build checked whole before it is reused."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlsdk.device.rtl import builds
from mncore_hdl.arch import MNCORE2_SIM


def test_a_build_is_checked_once_per_process_while_its_folder_exists(tmp_path):
    memo = builds.BuildMemo()
    calls: list[str] = []
    folder = tmp_path / "build"

    def build(say) -> Path:
        calls.append("build")
        folder.mkdir(exist_ok=True)
        return folder

    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert calls == ["build"]
    assert memo.folder("fake+waves", MNCORE2_SIM, build, print) == folder  # another variant
    assert calls == ["build", "build"]
    folder.rmdir()  # a deleted build folder is built (checked) again
    assert memo.folder("fake", MNCORE2_SIM, build, print) == folder
    assert calls == ["build", "build", "build"]


def _fake_vvp(n_files: int = 2) -> str:
    names = "".join(f'    "file{i}.v";\n' for i in range(n_files))
    return ("#! /usr/bin/vvp\n:ivl_version \"11.0 (stable)\";\n" + "S_0 .scope module;\n" * 50
            + f":file_names {n_files};\n" + names)


@pytest.fixture
def fake_icarus(monkeypatch, tmp_path):
    """build_icarus with the export and iverilog replaced by a writer of a small vvp."""
    import cocotb_tools.runner
    import mncore_hdl.top.cosim_tb
    from mlsdk.device.rtl import builds as icarus

    builds: list[Path] = []
    verilog = tmp_path / "verilog" / "cosim_top-abc" / "cosim_top.v"

    def export(config, root):
        verilog.parent.mkdir(parents=True, exist_ok=True)
        verilog.write_text("module cosim_tb; endmodule\n")
        return [verilog]

    class Runner:
        def build(self, *, build_dir, **kwargs):
            builds.append(Path(build_dir))
            (Path(build_dir) / "sim.vvp").write_text(_fake_vvp())

    monkeypatch.setattr(icarus, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(mncore_hdl.top.cosim_tb, "export_cosim_tb", export)
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda name: Runner())
    return icarus, builds


def test_truncated_vvp_cache_is_rebuilt(fake_icarus):
    from mncore_hdl.arch import MNCORE2_SIM

    icarus, builds = fake_icarus
    build_dir = icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 1
    icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 1, "a complete cache entry is reused"
    vvp = build_dir / "sim.vvp"
    whole = vvp.read_text()
    vvp.write_text(whole[: len(whole) // 2])  # an interrupted build
    icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 2 and vvp.read_text() == whole


def test_vvp_that_stays_broken_names_the_file(fake_icarus, monkeypatch):
    import cocotb_tools.runner
    from mncore_hdl.arch import MNCORE2_SIM

    icarus, builds = fake_icarus

    class Broken:
        def build(self, *, build_dir, **kwargs):
            (Path(build_dir) / "sim.vvp").write_text("#! /usr/bin/vvp\n:ivl_version")

    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda name: Broken())
    with pytest.raises(RuntimeError, match=r"incomplete .*sim\.vvp; delete it"):
        icarus.build_icarus(MNCORE2_SIM)
