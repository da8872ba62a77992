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
    rd = a + T.trcd + 8 + T.twtr    # the read waits tWTR after the last write beat
    seq = [(a, ACT, 0, 5), (a + T.trcd, WR, 0, 5, 0, 8), (rd, RD, 0, 5, 0, 8)]
    pre = max(a + T.tras, a + T.trcd + 8 + T.twr, rd + 8 + 1, rd + T.trtp)
    seq += [(pre, PRE, 0, 0), (pre + T.trp, REF, 0, 0), (pre + T.trp + T.trfc, ACT, 0, 6)]
    assert run(seq) == []


@pytest.mark.parametrize("seq,rule", [
    ([(100, ACT, 0, 5), (100 + T.trcd - 1, RD, 0, 5, 0, 8)], "tRCD"),
    ([(100, ACT, 0, 5), (100 + T.tras - 1, PRE, 0, 0)], "tRAS"),
    ([(100, ACT, 0, 5), (200, PRE, 0, 0), (200 + T.trp - 1, ACT, 0, 6)], "tRP"),
    ([(100, ACT, 0, 5), (120, WR, 0, 5, 0, 8), (128 + T.twr - 1, PRE, 0, 0)], "tWR"),
    ([(100, ACT, 0, 5), (120, RD, 0, 5, 0, 8), (124, RD, 0, 5, 0, 8)], "data bus"),
    ([(100, REF, 0, 0), (100 + T.trfc - 1, ACT, 0, 1)], "tRFC"),
    ([(100, ACT, 0, 5), (100 + T.trrd - 1, ACT, 1, 5)], "tRRD"),
    ([(100 + k * T.trrd, ACT, k, 5) for k in range(4)] + [(100 + T.tfaw - 1, ACT, 4, 5)],
     "tFAW"),
    ([(100, ACT, 0, 5), (110, ACT, 1, 5), (130, WR, 0, 5, 0, 8),
      (138 + T.twtr - 1, RD, 1, 5, 0, 8)], "tWTR"),
    ([(100, ACT, 0, 5), (110, ACT, 1, 5), (130, RD, 0, 5, 0, 8),
      (138 + T.trtw - 1, WR, 1, 5, 0, 8)], "tRTW"),
    ([(100, ACT, 0, 5), (130, RD, 0, 5, 0, 1), (130 + T.tccd - 1, RD, 0, 5, 0, 1)], "tCCD"),
    ([(100, ACT, 0, 5), (100 + T.tras - 2, RD, 0, 5, 0, 1),
      (100 + T.tras - 2 + T.trtp - 1, PRE, 0, 0)], "tRTP"),
])
def test_each_rule_is_checked(seq, rule):
    errors = run(seq)
    assert len(errors) == 1 and rule in errors[0], errors


def test_legal_rank_sequence_passes():
    acts = [(100 + k * T.trrd, ACT, k, 5) for k in range(4)] + [(100 + T.tfaw, ACT, 4, 5)]
    wr = 200
    cols = [(wr, WR, 0, 5, 0, 8), (wr + 8 + T.twtr, RD, 1, 5, 0, 8),
            (wr + 16 + T.twtr + T.trtw, WR, 2, 5, 0, 8)]
    assert run(acts + cols) == []


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
