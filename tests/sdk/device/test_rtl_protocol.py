"""The session protocol (``mlsdk/device/rtl/protocol.py``): requests and answers matched by
sequence number (:class:`Exchange`), and answers checked before use (:func:`check_answer`)."""

from __future__ import annotations

import pytest
from mlsdk.device.rtl.protocol import Exchange, ProtocolError, check_answer


def test_exchange_drops_older_answers_and_rejects_unknown_ones():
    ex = Exchange("Test")
    dropped = []
    ex.on_dropped = lambda req, ans: dropped.append((req["value"], ans["value"]))
    wire1, seq1, _ = ex.open({"op": "echo", "value": 1, "data": "big"}, 1.0)
    assert wire1 == {"op": "echo", "value": 1, "data": "big", "seq": seq1}
    _, seq2, _ = ex.open({"op": "echo", "value": 2}, 1.0)  # request 1's caller went away
    assert ex.interrupted
    assert not ex.accept({"value": 1, "seq": seq1}, seq2)
    assert dropped == [(1, 1)]
    assert ex.accept({"value": 2, "seq": seq2}, seq2)
    assert not ex.interrupted
    _, seq3, _ = ex.open({"op": "echo"}, 1.0)
    for bad in ({"seq": seq1}, {"seq": seq3 + 1}, {"seq": None}, {}):
        with pytest.raises(ProtocolError, match="out of step"):
            ex.accept(bad, seq3)


def test_exchange_forgets_answers_lost_to_an_interrupt():
    """An answer read but lost before its caller took it is pruned by the next answer."""
    ex = Exchange("Test")
    _, seq1, _ = ex.open({"op": "a"}, 1.0)
    _, seq2, _ = ex.open({"op": "b"}, 1.0)
    assert ex.accept({"seq": seq2}, seq2)
    assert not ex.interrupted
    with pytest.raises(ProtocolError):
        ex.accept({"seq": seq1}, seq2)


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
