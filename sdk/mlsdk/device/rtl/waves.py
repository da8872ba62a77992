"""Waveform options of the RTL devices, and the GTKWave save file that goes with each wave file.

A session with waves writes one file, FST by default on Icarus and Verilator (VCD on request:
the ``format`` option or ``$MNCORE_WAVES_FORMAT``; ``mncore2:rtl`` writes VCD), of every call
or of a window of calls (the ``calls`` option or ``$MNCORE_WAVES_CALLS``, e.g. ``2-3``). Its
save file (:mod:`mncore_hdl.tooling.gtkw`) is written from the variables the file declares,
read with ``pywellen`` (FST and VCD alike), with GTKWave markers at the first commands. A
file cut short (a file-size limit, a full disk) is reported, never given a save file. An FST
whose writer cannot repack it (Verilator's) is repacked as it closes (:func:`repack_fst`).
"""

from __future__ import annotations

import gzip
import os
import re
import resource
import shutil
import stat
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.tooling.files import atomic_output

from ...errors import DeviceError
from ...settings import SDK

__all__ = ["WAVES_ENV", "FORMAT_ENV", "CALLS_ENV", "FORMATS", "DEFAULT_FORMAT", "Mark",
           "waves_folder", "check_waves_folder", "make_waves_folder", "pick_wave_format",
           "parse_calls", "waves_calls", "vcd_variables", "wave_variables", "wave_time_unit_s",
           "vcd_problem", "wave_problem", "write_gtkw", "write_or_remove", "repack_fst",
           "REPACK_LEVEL"]

#: Environment variable naming a folder: every RTL-device session writes its waves there.
WAVES_ENV = SDK["MNCORE_WAVES"].name
#: Environment variable choosing the wave file's format (``fst`` or ``vcd``).
FORMAT_ENV = SDK["MNCORE_WAVES_FORMAT"].name
#: Environment variable choosing the calls recorded (``2-3``, ``1,4``).
CALLS_ENV = SDK["MNCORE_WAVES_CALLS"].name
FORMATS = ("fst", "vcd")
#: Each simulator's default format (Verilator: VCD where its FST writer cannot be compiled,
#: see ``tooling.verilator.fst_writer_missing``). FST is 30-300x smaller than VCD (the seed
#: flow on Icarus: 0.9 MB against 53 MB); Amaranth's simulator writes only VCD.
DEFAULT_FORMAT = {"icarus": "fst", "verilator": "fst", "rtl": "vcd"}
_ONLY = {"rtl": ("vcd",)}
#: FST block of a whole file compressed with gzip (libfst's ``FST_BL_ZWRAPPER``): its type
#: byte, then the section's length and the unpacked file's length (big-endian 64-bit).
_ZWRAPPER = 254
_ZWRAPPER_HEADER = struct.Struct(">BQQ")
#: gzip level of :func:`repack_fst` (libfst's own repack on close uses 4; 9 gained 2% on the
#: seed flow's file for three times the time).
REPACK_LEVEL = 4


@dataclass(frozen=True)
class Mark:
    """One host command on the command track: where it starts in the wave file.

    ``time`` is in the wave file's unit (None where the simulator cannot say); ``recorded``
    is False for a command outside the ``calls`` window (the dump was paused).
    """

    time: int | None
    seq: int
    kind: str
    call: int
    buffer: int | None
    recorded: bool


def waves_folder(option: str | None) -> str | None:
    """The waves folder: the device-string option if given, else ``$MNCORE_WAVES``.

    Either is checked (:func:`check_waves_folder`): a ValueError names the one that is bad.
    """
    if option is not None:
        check_waves_folder(option, "The ?waves option")
        return option
    value = SDK["MNCORE_WAVES"].raw()
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


def pick_wave_format(option: str | None, simulator: str) -> str:
    """The wave file's format: ``option``, else ``$MNCORE_WAVES_FORMAT``, else the simulator's
    default; ValueError naming the source when it is not one the simulator writes."""
    source, value = "The format option", option
    if value is None:
        source, value = f"${FORMAT_ENV}", SDK["MNCORE_WAVES_FORMAT"].raw()
    allowed = _ONLY.get(simulator, FORMATS)
    if value is None:
        default = DEFAULT_FORMAT.get(simulator, allowed[0])
        if simulator == "verilator" and default == "fst":
            from mncore_hdl.tooling.verilator import fst_writer_missing

            # its FST writer compiles against lz4 and zlib: without them, VCD still works
            default = "vcd" if fst_writer_missing() else "fst"
        return default
    if value not in allowed:
        raise ValueError(f"{source} must be one of {list(allowed)} on {simulator}, not "
                         f"{value!r}")
    return value


#: The most calls one window may name (``?calls=1-100000``), and the highest call number.
MAX_WINDOW_CALLS = 100_000
MAX_CALL = 2 ** 31 - 1
_CALLS_PART = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10}))?")


def parse_calls(text: str, source: str = "The calls option") -> frozenset[int]:
    """The calls a window names: ``"2"``, ``"2-3"``, ``"1,4-5"`` (calls count from 1).

    Raises ValueError naming ``source`` for anything else, for a call past :data:`MAX_CALL`,
    and for a window of more than :data:`MAX_WINDOW_CALLS` calls.
    """
    calls: set[int] = set()
    if not isinstance(text, str) or len(text) > 4096:
        raise ValueError(f"{source} must be a short str of calls like 2, 2-3 or 1,4-5, not "
                         f"{str(text)[:40]!r}...")
    for part in text.split(","):
        match = _CALLS_PART.fullmatch(part.strip())
        lo = int(match.group(1)) if match else 0
        hi = int(match.group(2) or match.group(1)) if match else 0
        if not 1 <= lo <= hi <= MAX_CALL:
            raise ValueError(f"{source} must be calls like 2, 2-3 or 1,4-5 (counting from 1, "
                             f"at most {MAX_CALL}), not {text[:80]!r}")
        if len(calls) + hi - lo + 1 > MAX_WINDOW_CALLS:
            raise ValueError(f"{source} names more than {MAX_WINDOW_CALLS} calls "
                             f"(MAX_WINDOW_CALLS) in {text[:80]!r}; record a narrower window")
        calls.update(range(lo, hi + 1))
    return frozenset(calls)


def waves_calls(option: str | None) -> frozenset[int] | None:
    """The calls window: ``option``, else ``$MNCORE_WAVES_CALLS``; None records every call."""
    if option is not None:
        return parse_calls(option)
    value = SDK["MNCORE_WAVES_CALLS"].raw()
    return None if value is None else parse_calls(value, f"${CALLS_ENV}")


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


def wave_variables(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """``(scope, name, width)`` of every variable a VCD or FST file declares (pywellen)."""
    import pywellen

    out = []
    for var in pywellen.Waveform(str(path)).all_vars():
        name, full = var.name, var.full_name  # a name may hold dots (yosys's $auto$...cc:1)
        out.append((full[:-len(name) - 1] if full.endswith("." + name) else "", name,
                    var.bitwidth or 1))
    return out


def wave_time_unit_s(path: str | os.PathLike[str]) -> float:
    """Seconds per unit of a VCD or FST file's times (pywellen)."""
    import pywellen

    scale = pywellen.Waveform(str(path)).timescale
    return float(scale.factor) * 10.0 ** scale.unit.to_exponent()


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


def wave_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the wave file is not whole (None when it looks whole): :func:`vcd_problem` for a
    VCD; an FST that pywellen cannot open, or one at the file-size limit."""
    if not str(path).endswith(".fst"):
        return vcd_problem(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY and size >= limit:
        return f"it stops at the file-size limit of {limit} bytes (ulimit -f)"
    try:
        wave_variables(path)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pywellen panics (a BaseException) on a broken file
        return f"it cannot be read as FST ({exc})"
    return None


def write_gtkw(wave: str | os.PathLike[str], marks: Sequence[Mark] = (),
               config: ArchConfig = MNCORE2_SIM) -> Path:
    """Write ``<wave>.gtkw`` beside the wave file (and its translate filters in
    ``<wave>.filters/``): the command track, each port's decoded fields, the converter, the
    DRAM commands, counters, descriptors and controls, with a marker at each recorded
    command of ``marks`` (the first 26: GTKWave names them a .. z).

    Raises DeviceError naming the file when the wave file is cut short
    (:func:`wave_problem`; no save file is then written) or the save file cannot be written.
    """
    from mncore_hdl.tooling.gtkw import write_filters, write_save_file

    wave = Path(wave)
    problem = wave_problem(wave)
    if problem is not None:
        raise DeviceError(f"The waveform file {wave} is incomplete: {problem}; no GTKWave save "
                          "file was written for it")
    gtkw = wave.with_suffix(".gtkw")
    times = [m.time for m in marks if m.recorded and m.time is not None]
    variables = wave_variables(wave)
    unit_s = wave_time_unit_s(wave)  # Icarus writes picoseconds, Verilator nanoseconds

    def write(path: Path) -> None:
        filters = write_filters(wave.with_suffix(".filters"))
        with open(path, "w") as f:
            write_save_file(f, wave, variables, config, filters, times, unit_s)

    write_or_remove(gtkw, write, f"the GTKWave save file {gtkw}")
    return gtkw


def write_or_remove(path: Path, write: Callable[[Path], None], what: str) -> None:
    """``write(path)``; when it fails (a full disk, a file-size limit) the partial file is
    removed and a DeviceError names ``what``."""
    try:
        write(path)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise DeviceError(f"Could not write {what}: {exc.strerror or exc}") from None


def repack_fst(fst: str | os.PathLike[str], level: int = REPACK_LEVEL) -> bool:
    """Compress a whole FST file with gzip into one ZWRAPPER block, in place.

    This is what libfst does when a file is closed with repack on close (Icarus's
    ``-fst-space``): GTKWave and pywellen unpack the block as they open the file. Verilator
    5.048's FST writer (libfstwriter) packs its value changes with LZ4 only, which leaves a
    file about twice Icarus's for the same dump, and has no repack; gzip over its LZ4 blocks
    takes the seed flow's file from 1.8 MB to 0.72 MB.

    Returns False, leaving the file as it is, when it is already repacked. Raises DeviceError
    naming the file when the repacked copy cannot be written (the file is then left as it was).
    """
    fst = Path(fst)
    with open(fst, "rb") as src:
        if src.read(1) == bytes([_ZWRAPPER]):
            return False
        size = os.fstat(src.fileno()).st_size
        src.seek(0)
        with atomic_output(fst, mode=None) as tmp:
            write_or_remove(tmp, lambda path: _write_zwrapper(src, path, size, level),
                            f"the waveform file {fst} repacked (through {tmp.name})")
    return True


def _write_zwrapper(src: BinaryIO, path: Path, size: int, level: int) -> None:
    """Write ``src`` (``size`` bytes) to ``path`` as one ZWRAPPER block (:func:`repack_fst`)."""
    with open(path, "wb") as dst:
        dst.write(_ZWRAPPER_HEADER.pack(_ZWRAPPER, 0, size))
        with gzip.GzipFile(filename="", mode="wb", compresslevel=level, fileobj=dst,
                           mtime=0) as packed:
            shutil.copyfileobj(src, packed, 1 << 20)
        end = dst.tell()
        dst.seek(1)  # the section's length counts every byte after the type byte
        dst.write(struct.pack(">Q", end - 1))
