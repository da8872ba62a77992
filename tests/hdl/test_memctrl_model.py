"""The benches' reference pieces (mncore_hdl.testing.memctrl_model): the timing checker catches
violations."""

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.testing.memctrl_model import SparseMemory, TimingChecker, split_chunks

CFG = MNCORE2_SIM
T = CFG.timing
ACT, PRE, RD, WR, REF = 1, 2, 3, 4, 5


def run(commands):
    chk = TimingChecker(CFG)
    for c in commands:
        chk.command(*c)
    return chk.errors


def test_legal_sequence_passes():
    a = 100
    seq = [(a, ACT, 0, 5), (a + T.trcd, WR, 0, 5, 0, 8), (a + T.trcd + 8, RD, 0, 5, 0, 8)]
    pre = max(a + T.tras, a + T.trcd + 8 + T.twr, a + T.trcd + 16 + 1)
    seq += [(pre, PRE, 0, 0), (pre + T.trp, REF, 0, 0), (pre + T.trp + T.trfc, ACT, 0, 6)]
    assert run(seq) == []


@pytest.mark.parametrize("seq,rule", [
    ([(100, ACT, 0, 5), (100 + T.trcd - 1, RD, 0, 5, 0, 8)], "tRCD"),
    ([(100, ACT, 0, 5), (100 + T.tras - 1, PRE, 0, 0)], "tRAS"),
    ([(100, ACT, 0, 5), (200, PRE, 0, 0), (200 + T.trp - 1, ACT, 0, 6)], "tRP"),
    ([(100, ACT, 0, 5), (120, WR, 0, 5, 0, 8), (128 + T.twr - 1, PRE, 0, 0)], "tWR"),
    ([(100, ACT, 0, 5), (120, RD, 0, 5, 0, 8), (124, RD, 0, 5, 0, 8)], "data bus"),
    ([(100, REF, 0, 0), (100 + T.trfc - 1, ACT, 0, 1)], "tRFC"),
])
def test_each_rule_is_checked(seq, rule):
    errors = run(seq)
    assert len(errors) == 1 and rule in errors[0], errors


def test_state_errors():
    assert "open" in run([(100, ACT, 0, 5), (200, REF, 0, 0)])[0]
    assert "row" in run([(100, ACT, 0, 5), (200, RD, 0, 6, 0, 8)])[0]
    assert "closed" in run([(100, PRE, 0, 0)])[0]


def test_sparse_memory_and_chunks():
    mem = SparseMemory()
    mem.write(7, 0x1122334455667788)
    mem.write(7, 0xFFFFFFFFFFFFFFFF, 0b0000_0101)
    assert mem.read(7) == 0x11223344_55FF77FF   # bytes 0 and 2 replaced
    assert mem.read(8) == 0
    chunks = split_chunks(CFG, 0, CFG.row_lw - 3, 12, False)
    assert [(c.addr, c.length) for c in chunks] == [(CFG.row_lw - 3, 3), (CFG.row_lw, 8),
                                                    (CFG.row_lw + 8, 1)]
    edge = split_chunks(CFG, 0, CFG.sim_window_lw - 4, 12, True, [0] * 12, [0xFF] * 12)
    assert [(c.in_window, c.length) for c in edge] == [(True, 4), (False, 8)]
