"""A waveform file cut short is reported as an error naming it, and gets no GTKWave save file.

The cut files come from a child process writing under ``RLIMIT_FSIZE`` (as a simulator does
when the limit is inherited), and from files truncated by hand (a full disk). Also the FST
repack Verilator's files get as the session closes, and its failure to write.
"""

from __future__ import annotations

import gzip
import os
import resource
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlsdk.device.rtl.waves import repack_fst, vcd_problem, write_gtkw
from mlsdk.errors import DeviceError

HEADER = """$timescale 1ps $end
$scope module cosim_top $end
$var wire 1 ! busy_cycles $end
$var wire 1 " busy $end
$upscope $end
$enddefinitions $end
"""
VALUES = "".join(f"#{t}\n{t % 2}!\n" for t in range(2000))


def test_a_whole_vcd_gets_its_save_file(tmp_path):
    vcd = tmp_path / "whole.vcd"
    vcd.write_text(HEADER + VALUES)
    assert vcd_problem(vcd) is None
    assert write_gtkw(vcd).exists()


@pytest.mark.parametrize("cut, why", [(60, "inside its header"),
                                      (len(HEADER) + 7, "middle of a line")])
def test_a_cut_vcd_is_reported_and_gets_no_save_file(tmp_path, cut, why):
    vcd = tmp_path / "cut.vcd"
    vcd.write_text((HEADER + VALUES)[:cut])
    with pytest.raises(DeviceError, match=why) as info:
        write_gtkw(vcd)
    assert str(vcd) in str(info.value)
    assert not vcd.with_suffix(".gtkw").exists()


CHILD = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:  # the simulator's writes stop at the limit (SIGXFSZ is ignored in Python)
        with open(sys.argv[1], "w") as f:
            f.write(sys.argv[3])
    except OSError:
        pass
    from mlsdk.device.rtl.waves import write_gtkw
    from mlsdk.errors import DeviceError
    try:
        write_gtkw(sys.argv[1])
    except DeviceError as exc:
        print(exc)
""")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE here")
@pytest.mark.parametrize("where", ["header", "values"])
def test_a_vcd_cut_by_the_file_size_limit_is_reported(tmp_path, where):
    vcd = tmp_path / "limited.vcd"
    text = HEADER + VALUES
    # at a line boundary, so that only the limit gives the cut away
    limit = 40 if where == "header" else text.index("\n", len(HEADER) + 500) + 1
    out = subprocess.run([sys.executable, "-c", CHILD, str(vcd), str(limit), text],
                         capture_output=True, text=True, timeout=120, check=True)
    assert vcd.stat().st_size == limit
    assert f"The waveform file {vcd} is incomplete" in out.stdout
    assert ("file-size limit" if where == "values" else "limit") in out.stdout, out.stderr
    assert not Path(vcd).with_suffix(".gtkw").exists()


RENAME_CHILD = textwrap.dedent("""
    import os, resource, sys
    from pathlib import Path
    from mlsdk.device.rtl.verilator import fix_vcd_scope_names
    from mlsdk.errors import DeviceError
    size = os.path.getsize(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    try:
        fix_vcd_scope_names(Path(sys.argv[1]))
    except DeviceError as exc:
        print(exc)
""")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE here")
def test_a_verilator_header_rewrite_that_cannot_be_written_names_the_file(tmp_path):
    vcd = tmp_path / "verilator.vcd"
    text = HEADER.replace("busy_cycles", "$auto$x") + VALUES  # the rewrite adds a byte
    vcd.write_text(text)
    out = subprocess.run([sys.executable, "-c", RENAME_CHILD, str(vcd)], capture_output=True,
                         text=True, timeout=120, check=True)
    assert f"Could not write the waveform file {vcd} with" in out.stdout, out.stderr
    assert vcd.read_text() == text and [p.name for p in tmp_path.iterdir()] == [vcd.name]


def test_an_fst_is_repacked_whole_into_one_gzip_block_once(tmp_path):
    fst = tmp_path / "verilator.fst"
    data = bytes(range(256)) * 64  # any bytes: the repack does not parse the FST inside
    fst.write_bytes(data)
    assert repack_fst(fst)
    packed = fst.read_bytes()
    kind, section, unpacked = struct.unpack(">BQQ", packed[:17])
    # libfst's ZWRAPPER block: what GTKWave and pywellen unpack as they open the file
    assert (kind, section, unpacked) == (254, len(packed) - 1, len(data))
    assert gzip.decompress(packed[17:]) == data
    assert len(packed) < len(data)
    assert not repack_fst(fst) and fst.read_bytes() == packed
    assert [p.name for p in tmp_path.iterdir()] == [fst.name]


REPACK_CHILD = textwrap.dedent("""
    import os, resource, sys
    from mlsdk.device.rtl.waves import repack_fst
    from mlsdk.errors import DeviceError
    size = os.path.getsize(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    try:
        repack_fst(sys.argv[1])
    except DeviceError as exc:
        print(exc)
""")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE here")
def test_a_repack_that_cannot_be_written_names_the_file(tmp_path):
    fst = tmp_path / "verilator.fst"
    data = os.urandom(4096)  # gzip cannot shrink it: the repacked copy hits the limit
    fst.write_bytes(data)
    out = subprocess.run([sys.executable, "-c", REPACK_CHILD, str(fst)], capture_output=True,
                         text=True, timeout=120, check=True)
    assert f"Could not write the waveform file {fst} repacked" in out.stdout, (
        out.stderr)
    assert fst.read_bytes() == data and [p.name for p in tmp_path.iterdir()] == [fst.name]
