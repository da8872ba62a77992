"""Device-string options are parsed strictly: a bad ``?waves=`` folder, ``?waves`` with no value
and a key given twice are clear errors at ``MNDevice(...)`` naming the option; a folder that
cannot be made at first use is a DeviceError naming it, never a raw OS error.
"""

from __future__ import annotations

import os

import pytest
from mlsdk import MNDevice
from mlsdk.device.rtl.waves import WAVES_ENV, make_waves_folder, waves_folder
from mlsdk.errors import DeviceError


@pytest.mark.parametrize("query, message", [
    ("waves", r"\?waves option .* needs a folder"),
    ("waves=", r"\?waves option .* needs a folder"),
    ("waves=a&waves=b", "'waves' is given twice"),
    ("waves=a%00b", "without NUL bytes"),
    ("waves=" + "x" * 300, "not a usable folder: File name too long"),
])
def test_a_bad_waves_option_is_refused_at_mndevice(query, message):
    with pytest.raises(ValueError, match=message):
        MNDevice(f"mncore2:icarus?{query}")


@pytest.mark.parametrize("query, message", [
    ("format=ghw", r"\?format option .* must be fst or vcd, not 'ghw'"),
    ("calls=3-1", r"\?calls option .* must be calls like 2, 2-3 or 1,4-5"),
    ("calls=two", r"\?calls option .* must be calls like 2, 2-3 or 1,4-5"),
])
def test_a_bad_format_or_calls_option_is_refused_at_mndevice(query, message):
    with pytest.raises(ValueError, match=message):
        MNDevice(f"mncore2:icarus?waves=w&{query}")


def test_format_and_calls_options_are_taken_as_given():
    device = MNDevice("mncore2:verilator?waves=w&format=vcd&calls=2-3")
    assert device.options == {"waves": "w", "format": "vcd", "calls": "2-3"}


def test_a_waves_folder_that_is_a_file_or_under_one_is_refused(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    for folder in (afile, afile / "below"):
        with pytest.raises(ValueError, match=f"{afile} is not a folder"):
            MNDevice(f"mncore2:rtl?waves={folder}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in any folder")
def test_a_waves_folder_that_cannot_be_written_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ValueError, match="is not writable"):
        MNDevice(f"mncore2:rtl?waves={locked / 'w'}")


def test_good_waves_folders_are_taken_as_given(tmp_path):
    for folder in (tmp_path, tmp_path / "new" / "deeper", "~nosuchuser/x",
                   "/".join(["d"] * 2000)):
        assert MNDevice(f"mncore2:verilator?waves={folder}").options == {"waves": str(folder)}


def test_a_bad_waves_environment_variable_names_it(monkeypatch, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv(WAVES_ENV, str(afile))
    with pytest.raises(ValueError, match=rf"\${WAVES_ENV} names"):
        waves_folder(None)
    assert waves_folder(str(tmp_path)) == str(tmp_path)  # the option wins


def test_a_waves_folder_that_cannot_be_made_at_first_use_names_it(tmp_path):
    deep = tmp_path.joinpath(*["d"] * 1200)  # deeper than Path.mkdir's recursion allows
    try:
        make_waves_folder(deep)
        assert deep.is_dir()
    finally:  # bottom up: pytest's rmtree of tmp_path would recurse as deep
        while deep != tmp_path:
            deep.rmdir()
            deep = deep.parent
    blocker = tmp_path / "blocker"
    blocker.write_text("")  # e.g. created after MNDevice(...) checked the option
    with pytest.raises(DeviceError, match=f"Cannot create the waves folder {blocker / 'w'}"):
        make_waves_folder(blocker / "w")
