"""Export of the observation port's command stream as a DRAMPower command trace (pure Python)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..contracts.memctrl import Cmd

__all__ = ["drampower_lines", "write_drampower_trace"]

#: DRAMPower's name of each command kind of ``cmd_kind``.
DRAMPOWER_NAMES = {Cmd.ACT: "ACT", Cmd.PRE: "PRE", Cmd.RD: "RD", Cmd.WR: "WR", Cmd.REF: "REF"}


def _kind(value: int | str) -> Cmd:
    if isinstance(value, str):
        if value not in Cmd.__members__:
            raise ValueError(f"Command must be one of {', '.join(DRAMPOWER_NAMES.values())}, "
                             f"not {value!r}")
        return Cmd[value]
    try:
        return Cmd(value)
    except ValueError:
        raise ValueError(f"Command kind must be one of {[int(k) for k in DRAMPOWER_NAMES]}, "
                         f"not {value!r}") from None


def drampower_lines(commands: Iterable[tuple]) -> list[str]:
    """DRAMPower command-trace lines ``<cycle>,<command>,<bank>`` (DRAMPower 4's format).

    ``commands`` holds ``(cycle, kind, bank, ...)`` tuples in issue order, ``kind`` a
    :class:`~mncore_hdl.contracts.memctrl.Cmd` (or its value, or its name, as in
    ``TimingChecker.transcript``, whose REF entries have no bank: they get bank 0). Cycles are
    controller cycles; give DRAMPower a memspec whose clock is the controller's.
    """
    lines = []
    last = None
    for entry in commands:
        cycle, kind = int(entry[0]), _kind(entry[1])
        if kind is Cmd.NONE:
            continue
        if last is not None and cycle < last:
            raise ValueError(f"Commands must be in cycle order: cycle {cycle} after {last}")
        last = cycle
        bank = int(entry[2]) if len(entry) > 2 and kind is not Cmd.REF else 0
        lines.append(f"{cycle},{DRAMPOWER_NAMES[kind]},{bank}")
    return lines


def write_drampower_trace(path: str | os.PathLike[str], commands: Iterable[tuple]) -> int:
    """Write :func:`drampower_lines` of ``commands`` to ``path``; return the line count."""
    lines = drampower_lines(commands)
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return len(lines)
