"""Hostile wave files and wave options: a clear error and exit status, never a traceback, a hang
or an out-of-memory kill (issue 38, items 2 and 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from mlsdk import MNDevice
from mlsdk.device.rtl.waves import MAX_WINDOW_CALLS, parse_calls


def _bounded(code: str, limit: int = 1 << 30) -> subprocess.CompletedProcess:
    """Run ``code`` in a child with ``limit`` bytes of address space and a 60 s budget."""
    prelude = ("import resource; resource.setrlimit(resource.RLIMIT_AS, "
               f"({limit}, {limit}))\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())


@pytest.mark.parametrize("text", ["1-99999999999", "1-4000000000", "1-200000",
                                  ",".join(f"{k}-{k + 60000}" for k in range(1, 10 ** 6, 70000))])
def test_a_calls_window_too_wide_is_refused_in_bounded_memory(text):
    done = _bounded(f"""
        from mlsdk.device.rtl.waves import parse_calls
        try:
            parse_calls({text!r})
        except ValueError as exc:
            print("refused:", exc)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and ("MAX_WINDOW_CALLS" in done.stdout
                                          or "at most" in done.stdout)


@pytest.mark.parametrize("text", ["1-", "-3", "+2", "1_000", "\u0661", "2 3", "1--2", "",
                                  "0", "3-2", "1,,2", "1" * 5000])
def test_a_malformed_calls_window_is_a_value_error(text):
    with pytest.raises(ValueError, match="calls like 2, 2-3 or 1,4-5|short str"):
        parse_calls(text)


def test_a_window_at_the_limit_is_accepted():
    assert len(parse_calls(f"1-{MAX_WINDOW_CALLS}")) == MAX_WINDOW_CALLS
    assert parse_calls("2, 4-5") == {2, 4, 5}


@pytest.mark.parametrize("option", ["calls=0", "calls=1-", "format=fsdb",
                                    "format=", "calls=a&format=vcd"])
def test_a_device_string_with_a_malformed_wave_option_is_refused(option):
    with pytest.raises(ValueError, match=r"\?calls|\?format|calls option|format option"):
        MNDevice(f"mncore2:icarus?{option}")


# -- wave files ------------------------------------------------------------------------------


def _files(tmp_path):
    cases = {
        "empty.vcd": b"",
        "garbage.fst": bytes(range(256)) * 40,
        "truncated.vcd": b"$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk",
        "header.vcd": b"$comment " + b"A" * (8 << 20) + b" $end\n",
        "binary.vcd": b"\x00\xff" * 5000,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "link.fst").symlink_to("/etc/hostname")
    (tmp_path / "dangling.vcd").symlink_to(tmp_path / "nowhere.vcd")
    (tmp_path / "folder.fst").mkdir()
    return [*cases, "link.fst", "dangling.vcd", "folder.fst"]


def test_the_waves_cli_reports_every_broken_file_and_exits_1(tmp_path):
    pytest.importorskip("pywellen", reason="the waves reader needs pywellen")
    names = _files(tmp_path)
    done = _bounded(f"""
        import sys
        from mlsdk.waves.__main__ import main
        sys.exit(main({[str(tmp_path / n) for n in names]!r}))
    """, limit=4 << 30)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    for name in names:
        assert f"{tmp_path / name}:" in done.stderr, name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # nothing written


def test_a_wave_file_past_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    pytest.importorskip("pywellen", reason="the waves reader needs pywellen")
    import mlsdk.waves.reader as reader

    monkeypatch.setattr(reader, "MAX_WAVE_BYTES", 1000)
    path = tmp_path / "big.vcd"
    with open(path, "wb") as handle:
        handle.truncate(1 << 20)
    with pytest.raises(ValueError, match="MAX_WAVE_BYTES"):
        reader.Waves(path)
