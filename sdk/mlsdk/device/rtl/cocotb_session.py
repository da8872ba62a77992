"""One cocotb simulator process serving device operations: the session Icarus and Verilator share.

A session builds (or finds cached) its simulator, makes a private run folder
(:mod:`.runfolder`), listens on a Unix socket there that only its own simulator may use
(:mod:`.endpoint`), starts the simulator as the leader of a new process group
(:mod:`.process`) with the cocotb server inside it (:mod:`.simulator.server`), and then
exchanges one JSON request and one JSON answer per operation (:mod:`.channel`,
:mod:`.protocol`). Every wait is bounded: a simulator that exits or stops answering loses the
session (every later request gets a fatal error naming the kept run folder), and ``close()``
(also run by a finalizer at interpreter exit, e.g. after Ctrl-C) kills the whole process group,
so no simulator outlives its Context.

A simulator is a subclass saying how to build it (:meth:`CocotbSession._build`) and how to
start it (:meth:`CocotbSession._command`): :class:`~.icarus.IcarusSession` and
:class:`~.verilator.VerilatorSession`.
"""

from __future__ import annotations

import subprocess
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mncore_hdl.arch import ArchConfig

from .builds import BUILDS
from .channel import AnswerChannel, SimulatorGone
from .endpoint import Listener
from .images import Images, images_for
from .process import SimulatorProcess, simulator_env, terminate
from .protocol import Exchange, ProtocolError
from .runfolder import RunFolder

__all__ = ["CocotbSession", "START_TIMEOUT", "SERVER_MODULE", "answer_limit"]

#: Seconds the simulator may take from launch to its first answer.
START_TIMEOUT = 120.0
#: The cocotb test module every simulator runs.
SERVER_MODULE = "mlsdk.device.rtl.simulator.server"


def answer_limit(config: ArchConfig) -> int:
    """Longest answer line accepted: a read of the whole simulated DRAM (base64), plus 1 MiB."""
    window = config.groups * config.sim_window_lw * config.lw_bytes
    return 4 * -(-window // 3) + (1 << 20)


def _end(proc: subprocess.Popen, sock: Any, run: RunFolder) -> None:
    """Stop the simulator, then tidy its run folder (close and the finalizer)."""
    terminate(proc, sock)
    run.finish()


class CocotbSession(ABC):
    """One cocotb simulator process serving operations over a private Unix socket.

    Answers are checked before use (:func:`.protocol.check_answer`), and a line longer than
    :func:`answer_limit` loses the session.

    Parameters
    ----------
    config : ArchConfig
        The chip.
    vcd : path, optional
        Dump the session's waves there (FST for a ``.fst`` name, else VCD).
    progress : callable, optional
        ``progress(cycle, operations_done)`` as the simulator reports it.
    say : callable, optional
        Receives progress lines of the build and the start.
    """

    #: The simulator's short name (run folders, the build memo).
    kind: str
    #: The simulator's name in messages.
    label: str

    @abstractmethod
    def _build(self, say: Callable[[str], None]) -> Path:
        """The simulator's build folder (built on first use)."""

    @abstractmethod
    def _command(self, build_dir: Path, vcd: Path | None) -> tuple[list[str], dict[str, str]]:
        """The simulator's command line and the environment it needs beside the session's."""

    def _variant(self) -> str:
        """Which of the simulator's builds the session runs (the build memo's key): the one
        that writes its wave format, or the plain one."""
        return f"+waves-{self.waves.suffix.lstrip('.')}" if self.waves else ""

    def __init__(self, config: ArchConfig, vcd: Path | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 say: Callable[[str], None] = lambda s: None):
        self.config = config
        self.dead: str | None = None
        self.waves = Path(vcd) if vcd else None
        build_dir = BUILDS.folder(f"{self.kind}{self._variant()}", config, self._build, say)
        self.run = RunFolder(self.kind)
        self.test_dir = self.run.path
        self.log_path = self.test_dir / "simulator.log"
        listener = Listener(self.test_dir)
        argv, extra = self._command(build_dir, self.waves.resolve() if self.waves else None)
        env = simulator_env(config, listener.env(), extra)
        say(f"starting the {self.label} simulator")
        self.sock: Any = None
        try:
            self.process = SimulatorProcess(argv, env, self.test_dir, self.log_path, self.waves)
            self.proc = self.process.popen
            self._finalizer = weakref.finalize(self, _end, self.proc, None, self.run)
            self.sock = self._accept(listener)
        finally:
            listener.close()
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _end, self.proc, self.sock, self.run)
        self.channel = AnswerChannel(self.label, answer_limit(config), progress)
        self.exchange = Exchange(self.label)
        # True from the start of a request's send to its end: if an interrupt leaves it set,
        # part of a line may have gone out, and the stream can no longer be framed.
        self._sending = False
        try:
            ready = self._receive(time.monotonic() + START_TIMEOUT, "start")
        except ProtocolError as exc:
            self._fail(str(exc))
        if "error" in ready or ready.get("ready") is not True:
            self._fail(str(ready.get("error", f"the {self.label} simulator's first line was "
                                              f"{str(ready)[:80]}, not its ready line")))
        #: How images cross: as files in the run folder when the simulator takes them.
        self.images: Images = images_for(ready, self.test_dir)

    def _log_tail(self, lines: int = 15) -> str:
        return self.process.log_tail(lines)

    def _accept(self, listener: Listener) -> Any:
        """The simulator's connection (others that reach the socket first are refused)."""
        def alive() -> None:
            if not self.process.running():
                self._fail(f"the {self.label} simulator {self.process.exited()} "
                           f"before connecting; log {self.log_path}:\n{self._log_tail()}")

        try:
            return listener.accept(self.process.pid, time.monotonic() + START_TIMEOUT, alive)
        except TimeoutError:
            refused = (f"; refused {len(listener.refused)} other connection(s): "
                       f"{'; '.join(listener.refused[:3])}" if listener.refused else "")
            self._fail(f"the {self.label} simulator did not connect within "
                       f"{START_TIMEOUT:.0f} s{refused}; log {self.log_path}:\n{self._log_tail()}")
        raise AssertionError("unreachable")

    def lose(self, reason: str) -> str:
        """Mark the session lost (its run folder is kept, and named) and stop the simulator."""
        if str(self.test_dir) not in reason:
            reason += f" (run folder kept: {self.test_dir})"
        self.dead = reason
        self.run.failed = True
        terminate(self.proc, self.sock)
        return reason

    def _fail(self, reason: str) -> None:
        raise RuntimeError(self.lose(reason))

    def _ended(self, wait: float) -> str | None:
        """How the simulator ended, waiting up to ``wait`` s for it (None: it still runs)."""
        try:
            self.process.wait(wait)
        except subprocess.TimeoutExpired:
            return None
        return self.process.exited()

    def _receive(self, deadline: float, op: str) -> dict[str, Any]:
        """The next answer (progress lines passed on); a simulator gone loses the session."""
        try:
            return self.channel.receive(self.sock, deadline, op, self._ended)
        except SimulatorGone as exc:
            self._fail(f"{exc}; log {self.log_path}:\n{self._log_tail()}")
        raise AssertionError("unreachable")

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Execute one operation; ``{"error": ..., "fatal": True}`` if the simulator is lost.

        Answers of earlier requests whose caller was interrupted are drained and dropped
        first (the simulator finished those operations, in order). If an interrupt came while
        a request was being sent, the stream is no longer framed: the session is closed and
        every later request gets a fatal error saying so.
        """
        if not self.dead and self._sending:
            self.lose(f"the {self.label} session was interrupted while sending a request "
                       "and cannot be resynchronised; close this Context and open a new one")
        if self.dead:
            return {"error": self.dead, "fatal": True}
        wire, seq, deadline = self.exchange.open(msg, timeout)
        op = str(msg.get("op"))
        try:
            self._sending = True
            self.channel.send(self.sock, wire)
            self._sending = False
            while True:
                answer = self._receive(deadline, op)
                if self.exchange.accept(answer, seq):
                    return answer
        except (RuntimeError, OSError) as exc:
            self.exchange.done(seq)
            if not self.dead:
                self.lose(f"lost the {self.label} simulator: {exc}")
            return {"error": self.dead, "fatal": True}

    def close(self, timeout: float = 30.0) -> None:
        """Stop the server (the waves are flushed), wait for the process, kill it if it
        lingers; then remove the run folder, unless the session failed or
        ``$MNCORE_COSIM_KEEP_RUNS`` is set."""
        if not self.dead and not self._sending and self.process.running() \
                and self.sock is not None:
            try:
                self.request({"op": "stop"}, timeout)
                self.process.wait(timeout)
            except (RuntimeError, OSError, subprocess.TimeoutExpired):
                pass
        self._finalizer()
        self.dead = self.dead or "closed"
