"""The simulator sessions' per-process build memo (``mlsdk/device/rtl/builds.py``)."""

from __future__ import annotations

from pathlib import Path

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
