"""Images between the runtime and a cocotb simulator: inline, or as files in the run folder.

The files are the back door's own formats (``mlsdk.device.rtl.dma``): a load is big-endian raw
words on Verilator and hex lines on Icarus, a dump little-endian raw words or hex lines. The
runtime trusts no file name and no file size an answer gives.
"""

from __future__ import annotations

import numpy as np
import pytest
from mlsdk.device.rtl.dma import read_word_file
from mlsdk.device.rtl.images import FileImages, InlineImages, images_for
from mlsdk.device.rtl.protocol import ProtocolError, check_answer

ROWS = np.arange(12, dtype=np.uint64).reshape(3, 4) * np.uint64(0x0101010101010101)


def _dump(path, words: np.ndarray, binary: bool) -> None:
    """Write ``words`` as the back door dumps them (``%u``: little-endian; ``$writememh``)."""
    if binary:
        path.write_bytes(np.ascontiguousarray(words, dtype="<u8").tobytes())
    else:
        path.write_text("".join(f"{int(w):016x}\n" for w in words))


def test_a_simulator_that_takes_files_says_so_in_its_ready_line(tmp_path):
    assert isinstance(images_for({"ready": True}, tmp_path), InlineImages)
    assert isinstance(images_for({"ready": True, "files": "yes"}, tmp_path), InlineImages)
    files = images_for({"ready": True, "files": {"binary": True}}, tmp_path)
    assert isinstance(files, FileImages) and files.binary


@pytest.mark.parametrize("binary", [True, False])
def test_outgoing_rows_are_files_in_the_back_doors_load_format(tmp_path, binary):
    fields = FileImages(tmp_path, binary).outgoing(ROWS)
    assert fields.keys() == {"files"} and len(fields["files"]) == 3
    for name, row in zip(fields["files"], ROWS, strict=True):
        data = (tmp_path / name).read_bytes()
        if binary:  # $fread: big-endian words
            assert np.array_equal(np.frombuffer(data, dtype=">u8"), row)
        else:
            assert read_word_file(tmp_path / name, 4, False).tolist() == row.tolist()


@pytest.mark.parametrize("binary", [True, False])
def test_an_answer_in_files_is_read_and_the_files_removed(tmp_path, binary):
    images = FileImages(tmp_path, binary)
    names = [f"out-1-{i}.dat" for i in range(3)]
    for name, row in zip(names, ROWS, strict=True):
        _dump(tmp_path / name, row, binary)
    got = images.incoming({"files": names}, (3, 4))
    assert np.array_equal(got, ROWS)
    assert not list(tmp_path.iterdir())


def test_a_dump_of_the_wrong_size_is_an_error_and_removed(tmp_path):
    images = FileImages(tmp_path, True)
    _dump(tmp_path / "out-1-0.dat", ROWS[0][:3], True)
    with pytest.raises(RuntimeError, match="24 bytes"):
        images.incoming({"files": ["out-1-0.dat"]}, (4,))
    assert not list(tmp_path.iterdir())


def test_inline_images_are_base64_both_ways():
    images = InlineImages()
    fields = images.outgoing(ROWS)
    assert images.asking() == {}
    assert np.array_equal(images.incoming(fields, (3, 4)), ROWS)


@pytest.mark.parametrize("files", [["../escape.dat"], ["a/b.dat"], ["ok.dat"], [""], "x.dat"])
def test_a_read_answer_must_name_one_plain_file_per_group(files):
    request = {"op": "read", "to_files": True,
               "buffer": {"group": 0, "groups": 2, "address": 0, "lw_per_group": 4}}
    answer = {"cycles": 1, "files": files, "port_beats": [[0, 0]]}
    with pytest.raises(ProtocolError, match="plain file name"):
        check_answer(request, answer, "Test")
    check_answer(request, {**answer, "files": ["out-1-0.dat", "out-1-1.dat"]}, "Test")


def test_a_profile_answer_holds_non_negative_figures():
    check_answer({"op": "profile"}, {"profile": {"sim_s": 1.5, "ops": 3}}, "Test")
    with pytest.raises(ProtocolError, match="non-negative number"):
        check_answer({"op": "profile"}, {"profile": {"sim_s": -1}}, "Test")


def test_the_files_of_an_answer_nobody_takes_are_removed(tmp_path):
    images = FileImages(tmp_path, True)
    _dump(tmp_path / "out-3-0.dat", ROWS[0], True)
    images.discard({"files": ["out-3-0.dat"]})
    InlineImages().discard({"data": ""})
    assert not list(tmp_path.iterdir())
