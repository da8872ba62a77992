"""The DRAMPower trace export (mncore_hdl.memctrl.trace) of a command stream."""

import pytest
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts.memctrl import Cmd
from mncore_hdl.memctrl.trace import drampower_lines, write_drampower_trace
from mncore_hdl.testing.hdl_checks import imports_without_amaranth
from mncore_hdl.testing.memctrl_model import TimingChecker


def test_imports_without_amaranth():
    imports_without_amaranth("mncore_hdl.memctrl.trace")


def test_lines_from_the_observation_port_and_the_checker(tmp_path):
    raw = [(3, Cmd.ACT, 2, 7), (15, 3, 2, 7, 0, 8), (40, Cmd.PRE, 2, 0), (60, Cmd.REF, 0, 0)]
    want = ["3,ACT,2", "15,RD,2", "40,PRE,2", "60,REF,0"]
    assert drampower_lines(raw) == want
    chk = TimingChecker(MNCORE2_SIM)
    for c in raw:
        chk.command(c[0], int(c[1]), c[2], c[3], 0, c[5] if len(c) > 5 else 0)
    assert drampower_lines(chk.transcript) == want
    path = tmp_path / "commands.trace"
    assert write_drampower_trace(path, raw) == 4
    assert path.read_text() == "".join(w + "\n" for w in want)


def test_validation():
    with pytest.raises(ValueError, match="Commands must be in cycle order: cycle 2 after 5"):
        drampower_lines([(5, Cmd.ACT, 0), (2, Cmd.PRE, 0)])
    with pytest.raises(ValueError, match="Command kind must be one of"):
        drampower_lines([(5, 9, 0)])
    with pytest.raises(ValueError, match="Command must be one of ACT, PRE, RD, WR, REF, not 'NOP'"):
        drampower_lines([(5, "NOP", 0)])
