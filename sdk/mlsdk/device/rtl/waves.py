"""Waveform options of the RTL devices and the GTKWave save file that goes with each VCD.

Both simulators name the top's ports the same way (``host__0__req__valid``), so one reader of
the VCD header finds them in either file and groups them: host ports, compute ports, the layout
converter (``busy``, ``done``, ``error``), the counters, and the input-descriptor table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.converter import COUNTERS, REGISTER_BUS, STATUS_PORTS, Reg
from mncore_hdl.contracts.cosim import (
    CYCLE,
    DESC_PORTS,
    MC_IDLE,
    PAYLOAD,
    READY,
    STREAMS,
    TOP_PATHS,
    VALID,
)

__all__ = ["WAVES_ENV", "waves_folder", "vcd_variables", "write_gtkw"]

#: Environment variable naming a folder: every RTL-device session writes its waves there.
WAVES_ENV = "MNCORE_WAVES"


def waves_folder(option: str | None) -> str | None:
    """The waves folder: the device-string option if given, else ``$MNCORE_WAVES``."""
    return option or os.environ.get(WAVES_ENV) or None


def vcd_variables(vcd: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """``(scope, name, width)`` of every variable declared in the VCD header."""
    out = []
    scopes: list[str] = []
    with open(vcd, errors="replace") as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "$scope":
                scopes.append(words[2])
            elif words[0] == "$upscope":
                scopes.pop()
            elif words[0] == "$var":
                out.append((".".join(scopes), words[4], int(words[2])))
            elif words[0] == "$enddefinitions":
                break
    return out


def _any(names: Iterable[str]) -> str:
    return "(" + "|".join(re.escape(n) for n in names) + ")$"


_STREAM_MEMBERS = (r"__\d+__(" + "|".join(STREAMS) + r")__(" + "|".join((VALID, READY, PAYLOAD))
                   + ")$")
#: The GTKWave groups: the top's ports by role, named as in ``mncore_hdl.contracts``.
_GROUPS = [
    *((f"{path} ports", re.compile(re.escape(path) + _STREAM_MEMBERS)) for path in TOP_PATHS),
    ("layout converter", re.compile(_any([*STATUS_PORTS, *(n for n, (d, _) in
                                                          REGISTER_BUS.items() if d == "in")]))),
    ("counters", re.compile(_any([*COUNTERS, CYCLE, MC_IDLE]))),
    ("input descriptors", re.compile(_any(DESC_PORTS))),
    ("host DMA and back door", re.compile(_any(tb.CONTROL))),
]
#: A port every top has (the converter's busy-cycle counter): its shallowest scope is the top.
_TOP_MARKER = next(name for name, reg in COUNTERS.items() if reg == Reg.BUSY_CYCLES)


def write_gtkw(vcd: str | os.PathLike[str]) -> Path:
    """Write ``<vcd>.gtkw`` beside the VCD, showing the top's ports in named groups."""
    from vcd.gtkw import GTKWSave

    vcd = Path(vcd)
    variables = vcd_variables(vcd)
    tops = [scope for scope, name, _ in variables if name == _TOP_MARKER]
    top = min(tops, key=lambda s: s.count(".")) if tops else ""
    ports = [(name, width) for scope, name, width in variables if scope == top]
    gtkw = vcd.with_suffix(".gtkw")
    with open(gtkw, "w") as f:
        save = GTKWSave(f)
        save.dumpfile(str(vcd.resolve()))
        save.zoom_markers(-20.0)
        for title, pattern in _GROUPS:
            chosen = sorted({(n, w) for n, w in ports if pattern.match(n)},
                            key=lambda nw: _natural(nw[0]))
            if not chosen:
                continue
            with save.group(title):
                for name, width in chosen:
                    suffix = f"[{width - 1}:0]" if width > 1 else ""
                    save.trace(f"{top}.{name}{suffix}" if top else name + suffix,
                               datafmt="hex" if width > 1 else "bin")
    return gtkw


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
