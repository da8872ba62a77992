"""The simulator as a child process: its environment, its process group, its log, its end.

The simulator (``vvp`` under cocotb's launcher, or a Verilator model's executable) runs as the
leader of a new process group, with its output in the run folder's ``simulator.log``. Ending
the session kills the whole group (SIGTERM, then SIGKILL), so nothing it started outlives it;
how it ended (an exit code, or SIGXFSZ at the file-size limit) is described for messages.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from mncore_hdl.arch import ArchConfig

from ... import paths

__all__ = ["SimulatorProcess", "SIMULATOR_ENV", "simulator_env", "terminate"]

#: Environment of every simulator process: cocotb would install pytest's assertion rewriting
#: for every module the server imports (numpy included; 0.5 s per start where no bytecode is
#: cached), and numpy's OpenBLAS threads would only compete with the simulation for the cores.
SIMULATOR_ENV = {"COCOTB_REWRITE_ASSERTION_FILES": "", "OPENBLAS_NUM_THREADS": "1"}


def simulator_env(config: ArchConfig, *parts: dict[str, str]) -> dict[str, str]:
    """The simulator's environment: this process's, :data:`SIMULATOR_ENV` under it, these
    packages first on ``PYTHONPATH``, the design's config, then ``parts`` in order."""
    env = {**SIMULATOR_ENV, **os.environ}
    env["PYTHONPATH"] = os.pathsep.join(
        [*map(str, paths.source_roots()), env.get("PYTHONPATH", "")])
    env["MNCORE_COSIM_CONFIG"] = config.to_json()
    for part in parts:
        env.update(part)
    return env


class SimulatorProcess:
    """A simulator started as the leader of its own process group, logging to ``log_path``.

    Parameters
    ----------
    argv : sequence of str
        The command line.
    env : dict
        Its whole environment.
    cwd : Path
        Its working folder (the run folder).
    log_path : Path
        Where its standard output and error go.
    waves : Path, optional
        The session's wave file, named when a file-size limit kills the simulator.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path,
                 waves: Path | None = None):
        self.log_path = log_path
        self.waves = waves
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(
                list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.popen.pid

    def running(self) -> bool:
        """Whether the simulator has not exited yet."""
        return self.popen.poll() is None

    def wait(self, timeout: float) -> None:
        """Wait for it to exit (``subprocess.TimeoutExpired`` after ``timeout`` seconds)."""
        self.popen.wait(timeout)

    def exited(self) -> str:
        """How the simulator ended, for messages (a file-size limit kills it by SIGXFSZ)."""
        code = self.popen.returncode
        if code == -signal.SIGXFSZ:
            wrote = f", such as its waves {self.waves}," if self.waves else ""
            return (f"was killed by SIGXFSZ (a file it wrote{wrote} reached the file-size "
                    "limit, ulimit -f)")
        return f"exited with code {code}"

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` of its log."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no simulator log)"
        return "\n".join(text[-lines:])


def terminate(proc: subprocess.Popen, sock: socket.socket | None) -> None:
    """Close the connection and kill the simulator's process group (idempotent; used by
    close, the loss of a session and the finalizer)."""
    if sock is not None:
        try:
            sock.close()
        except OSError:
            pass
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    else:
        try:  # the launcher exited; make sure nothing it started lingers
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
