"""Waveform options of the RTL devices and the GTKWave save file that goes with each VCD.

Both simulators name the top's ports the same way (``host__0__req__valid``), so one reader of
the VCD header finds them in either file and groups them: host ports, compute ports, the layout
converter (``busy``, ``done``, ``error``), the counters, and the input-descriptor table. A VCD
cut short (a file-size limit, a full disk) is reported, never given a save file.
"""

from __future__ import annotations

import os
import re
import resource
import stat
from collections.abc import Callable, Iterable
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

from ...errors import DeviceError

__all__ = ["WAVES_ENV", "waves_folder", "check_waves_folder", "make_waves_folder",
           "vcd_variables", "vcd_problem", "write_gtkw", "write_or_remove"]

#: Environment variable naming a folder: every RTL-device session writes its waves there.
WAVES_ENV = "MNCORE_WAVES"


def waves_folder(option: str | None) -> str | None:
    """The waves folder: the device-string option if given, else ``$MNCORE_WAVES``.

    Either is checked (:func:`check_waves_folder`): a ValueError names the one that is bad.
    """
    if option is not None:
        check_waves_folder(option, "The ?waves option")
        return option
    value = os.environ.get(WAVES_ENV) or None
    if value is not None:
        check_waves_folder(value, f"${WAVES_ENV}")
    return value


def check_waves_folder(value: str, source: str) -> Path:
    """The folder ``value`` names, if it is, or can be made, a folder this user can write.

    Nothing is created. Raises ValueError naming ``source`` (``?waves``, ``$MNCORE_WAVES``)
    when the value is empty, holds a NUL byte, or names (or lies under) something that is not
    a writable folder.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{source} needs a folder (e.g. ?waves=build/waves), not {value!r}")
    if "\0" in value:
        raise ValueError(f"{source} must be a folder name without NUL bytes, not {value!r}")
    folder = probe = Path(value)
    while True:  # up to the nearest part that exists: it must be a folder we can write in
        try:
            mode = probe.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):  # the latter: a file above it
            if probe.parent == probe:
                break
            probe = probe.parent
            continue
        except (OSError, ValueError) as exc:
            raise ValueError(f"{source} names {value!r}, which is not a usable folder: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        if not stat.S_ISDIR(mode):
            raise ValueError(f"{source} names {value!r}, which is not a usable folder: "
                             f"{probe} is not a folder")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ValueError(f"{source} names {value!r}, which is not a usable folder: "
                             f"{probe} is not writable")
        break
    return folder


def make_waves_folder(folder: Path) -> None:
    """Create the waves folder (and its parents); DeviceError naming it when that fails.

    Parents are made one by one, top down (``Path.mkdir(parents=True)`` recurses once per
    missing part).
    """
    missing = []
    probe = folder
    while not probe.is_dir() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    try:
        for part in reversed(missing):
            part.mkdir(exist_ok=True)
    except OSError as exc:
        raise DeviceError(f"Cannot create the waves folder {folder} (the ?waves option or "
                          f"${WAVES_ENV}): {exc.strerror or exc}") from None


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


def vcd_problem(vcd: str | os.PathLike[str]) -> str | None:
    """Why the VCD is not a whole file (None when it looks whole).

    A simulator writing under a file-size limit (``RLIMIT_FSIZE``, which it inherits from this
    process) or onto a full disk stops writing without failing: the file then ends at the
    limit, inside its header, or in the middle of a line.
    """
    try:
        size = os.path.getsize(vcd)
        with open(vcd, "rb") as f:
            header_done = any(line.lstrip().startswith(b"$enddefinitions") for line in f)
            f.seek(max(size - 1, 0))
            last = f.read(1)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY and size >= limit:
        return f"it stops at the file-size limit of {limit} bytes (ulimit -f)"
    if not header_done:
        return f"it ends inside its header, after {size} bytes"
    if last != b"\n":
        return f"it ends in the middle of a line, after {size} bytes"
    return None


def write_gtkw(vcd: str | os.PathLike[str]) -> Path:
    """Write ``<vcd>.gtkw`` beside the VCD, showing the top's ports in named groups.

    Raises DeviceError naming the file when the VCD is cut short (:func:`vcd_problem`; no
    save file is then written) or the save file cannot be written.
    """
    vcd = Path(vcd)
    problem = vcd_problem(vcd)
    if problem is not None:
        raise DeviceError(f"The waveform file {vcd} is incomplete: {problem}; no GTKWave save "
                          "file was written for it")
    gtkw = vcd.with_suffix(".gtkw")
    write_or_remove(gtkw, lambda path: _write_save_file(vcd, path),
                    f"the GTKWave save file {gtkw}")
    return gtkw


def write_or_remove(path: Path, write: Callable[[Path], None], what: str) -> None:
    """``write(path)``; when it fails (a full disk, a file-size limit) the partial file is
    removed and a DeviceError names ``what``."""
    try:
        write(path)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise DeviceError(f"Could not write {what}: {exc.strerror or exc}") from None


def _write_save_file(vcd: Path, gtkw: Path) -> None:
    from vcd.gtkw import GTKWSave

    variables = vcd_variables(vcd)
    tops = [scope for scope, name, _ in variables if name == _TOP_MARKER]
    top = min(tops, key=lambda s: s.count(".")) if tops else ""
    ports = [(name, width) for scope, name, width in variables if scope == top]
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


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
