"""``mncore2:icarus``: the co-simulation top as Verilog, under cocotb on Icarus, in a child process.

On first use the runtime exports the top to Verilog and compiles it (both cached under
``build/cosim``), listens on a Unix socket in the session's private run folder
(:mod:`.endpoint`) and starts the simulator as the leader of a new process group. Operations
and results cross as JSON lines. Every wait is bounded: a simulator
that exits or stops answering becomes a :class:`~mlsdk.errors.DeviceError`-ready error result,
and ``close()`` (also run by a finalizer at interpreter exit, e.g. after Ctrl-C) kills the whole
process group, so no simulator outlives its Context.

:class:`IcarusDevice` is the device; :class:`IcarusSession` the simulator process it drives.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mncore_hdl.arch import ArchConfig
from mncore_hdl.tooling.files import build_lock
from mncore_hdl.tooling.progress import ticking
from mncore_hdl.top.cosim_tb import TB_MODULE

from ... import paths
from ...errors import DeviceNotAvailableError
from ...paths import CHECKOUT
from ...settings import SDK
from .device import RtlDevice
from .endpoint import Listener
from .protocol import Exchange, ProtocolError

__all__ = ["IcarusDevice", "IcarusSession", "REPO_ROOT", "BUILD_ROOT", "SERVER_MODULE",
           "KEEP_RUNS_ENV", "BUILDS", "BuildMemo", "build_icarus", "answer_limit"]

REPO_ROOT = CHECKOUT
BUILD_ROOT = paths.BUILD_ROOT / "cosim"
#: Seconds the simulator may take from launch to its first answer.
START_TIMEOUT = 120.0
#: The cocotb test module every simulator runs.
SERVER_MODULE = "mlsdk.device.rtl.cocotb_server"


def build_icarus(config: ArchConfig, say: Callable[[str], None] = lambda s: None) -> Path:
    """Export and compile the testbench top for ``config`` (cached); return the cocotb build folder.

    A cached ``sim.vvp`` is used only when it is complete: it must match the stamp written
    beside it after its build (``sim.vvp.ok``: size and SHA-256), or, for a cache entry from
    before stamps, end with iverilog's whole file-name table. A partial one (an interrupted
    build, a full disk) is rebuilt; if the rebuild is no better, the RuntimeError names the
    file to delete.
    """
    from cocotb_tools.runner import get_runner
    from mncore_hdl.top.cosim_tb import TB_MODULE, export_cosim_tb

    with ticking(say, "exporting the co-simulation top to Verilog (once per design, then "
                 "cached)"):
        sources = export_cosim_tb(config, BUILD_ROOT / "verilog")
    key = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    build_dir = BUILD_ROOT / "icarus" / f"{TB_MODULE}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    vvp = build_dir / "sim.vvp"
    with build_lock(build_dir / ".lock"):  # one compile at a time
        if vvp.exists() and not _vvp_complete(vvp):
            say(f"the cached {vvp} is incomplete; rebuilding it")
            vvp.unlink()
        if not vvp.exists():
            _stamp(vvp).unlink(missing_ok=True)
            with ticking(say, "compiling the Verilog with iverilog"):
                get_runner("icarus").build(sources=sources, hdl_toplevel=TB_MODULE,
                                           build_dir=build_dir, waves=True,
                                           timescale=("1ns", "1ps"))
            if not vvp.exists() or not _vvp_well_formed(vvp):
                raise RuntimeError(f"iverilog left an incomplete {vvp}; delete it (and "
                                   f"{build_dir}) and try again")
            _stamp(vvp).write_text(_fingerprint(vvp))
    return build_dir


class BuildMemo:
    """Build folders already built or checked, by (simulator and variant, config): a session
    after the first one skips the export's digest and the build cache's checks (0.2-0.4 s)."""

    def __init__(self) -> None:
        self._folders: dict[tuple[str, str], Path] = {}

    def folder(self, kind: str, config: ArchConfig,
               build: Callable[[Callable[[str], None]], Path],
               say: Callable[[str], None]) -> Path:
        """``build(say)``, once per (``kind``, ``config``) while its folder exists."""
        key = (kind, config.to_json())
        known = self._folders.get(key)
        if known is not None and known.is_dir():
            return known
        self._folders[key] = build_dir = build(say)
        return build_dir


#: This process's memo, shared by every Icarus and Verilator session.
BUILDS = BuildMemo()


#: Environment of every simulator process: cocotb would install pytest's assertion rewriting
#: for every module the server imports (numpy included; 0.5 s per start where no bytecode is
#: cached), and numpy's OpenBLAS threads would only compete with the simulation for the cores.
SIMULATOR_ENV = {"COCOTB_REWRITE_ASSERTION_FILES": "", "OPENBLAS_NUM_THREADS": "1"}


def _stamp(vvp: Path) -> Path:
    return vvp.with_name(vvp.name + ".ok")


def _fingerprint(vvp: Path) -> str:
    import hashlib

    data = vvp.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def _vvp_complete(vvp: Path) -> bool:
    """True when ``vvp`` matches its build stamp (or, unstamped, is well formed)."""
    stamp = _stamp(vvp)
    try:
        if stamp.exists():
            return stamp.read_text() == _fingerprint(vvp)
        if _vvp_well_formed(vvp):
            stamp.write_text(_fingerprint(vvp))
            return True
    except OSError:
        pass
    return False


def _vvp_well_formed(vvp: Path) -> bool:
    """True when ``vvp`` has iverilog's header and ends with its complete file-name table
    (``:file_names N;`` and N quoted lines), which iverilog writes last."""
    try:
        with open(vvp, "rb") as handle:
            head = handle.read(256)
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 65536))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    if not head.startswith(b"#!") or b":ivl_version" not in head:
        return False
    marker = tail.rfind(":file_names ")
    if marker < 0 or not tail.endswith("\n"):
        return False
    first, *names = tail[marker:].rstrip("\n").split("\n")
    try:
        count = int(first.removeprefix(":file_names ").rstrip(";"))
    except ValueError:
        return False
    return len(names) == count and all(n.strip().startswith('"') and n.strip().endswith('";')
                                       for n in names)


def answer_limit(config: ArchConfig) -> int:
    """Longest answer line accepted: a read of the whole simulated DRAM (base64), plus 1 MiB."""
    window = config.groups * config.sim_window_lw * config.lw_bytes
    return 4 * -(-window // 3) + (1 << 20)


def _terminate(proc: subprocess.Popen, sock: socket.socket | None) -> None:
    """Kill the simulator's process group (idempotent; used by close and the finalizer)."""
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


#: Set to 1 to keep every session's run folder (``build/cosim/runs/<sim>-<pid>-<id>/``: the
#: simulator's log, results and back-door DRAM image); a failed session's is always kept.
KEEP_RUNS_ENV = SDK["MNCORE_COSIM_KEEP_RUNS"].name


class _RunFolder:
    """A session's private working folder (mode 0700), removed when the session ends well."""

    def __init__(self, kind: str):
        runs = BUILD_ROOT / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        # mkdtemp: a fresh name, created 0700, never a folder someone made beforehand
        self.path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=runs))
        self.failed = False

    def finish(self) -> None:
        """Remove the folder, unless the session failed or the user asked to keep it."""
        if not self.failed and not SDK["MNCORE_COSIM_KEEP_RUNS"].get():
            shutil.rmtree(self.path, ignore_errors=True)


def _end(proc: subprocess.Popen, sock: socket.socket | None, run: _RunFolder) -> None:
    """Stop the simulator, then tidy its run folder (close and the finalizer)."""
    _terminate(proc, sock)
    run.finish()


class IcarusSession:
    """One Icarus simulator process serving operations over a private Unix socket.

    The connection is made by :mod:`.endpoint`; the session runs in its own run folder
    (:data:`KEEP_RUNS_ENV`). Answers are checked before use (:func:`.protocol.check_answer`),
    and a line longer than :func:`answer_limit` loses the session.

    Parameters
    ----------
    config : ArchConfig
        The chip.
    vcd : path, optional
        Dump the session's waves there (FST for a ``.fst`` name, else VCD).
    progress : callable, optional
        ``progress(cycle, operations_done)`` as the simulator reports it.
    """

    kind = "icarus"
    #: The simulator's name in messages, and the script that runs the cocotb server on it
    #: (beside this file, or an absolute path).
    label = "Icarus"
    launcher = "icarus_launch.py"

    def _build(self, say: Callable[[str], None]) -> Path:
        """The cocotb build folder of the testbench top (built on first use)."""
        return build_icarus(self.config, say)

    def _command(self, build_dir: Path, vcd: Path | None) -> tuple[list[str], dict[str, str]]:
        """The simulator's command line and the environment it needs beside the session's.

        Here the launcher script, which runs the cocotb server through cocotb's runner.
        """
        return [sys.executable, str(Path(__file__).parent / self.launcher)], {
            "MNCORE_COSIM_LAUNCH": json.dumps({
                "toplevel": TB_MODULE, "module": SERVER_MODULE, "build_dir": str(build_dir),
                "test_dir": str(self.test_dir), "vcd": str(vcd) if vcd else None})}

    def __init__(self, config: ArchConfig, vcd: Path | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 say: Callable[[str], None] = lambda s: None):
        self.config = config
        self.progress = progress
        self.dead: str | None = None
        variant = f"+waves-{Path(vcd).suffix.lstrip('.')}" if vcd else ""
        build_dir = BUILDS.folder(f"{self.kind}{variant}", config, self._build, say)
        self.waves = Path(vcd) if vcd else None
        self.run = _RunFolder(self.kind)
        self.test_dir = self.run.path
        self.log_path = self.test_dir / "simulator.log"
        listener = Listener(self.test_dir)
        env = {**SIMULATOR_ENV, **os.environ}
        env["PYTHONPATH"] = os.pathsep.join(
            [*map(str, paths.source_roots()), env.get("PYTHONPATH", "")])
        env.update(listener.env())
        env["MNCORE_COSIM_CONFIG"] = config.to_json()
        argv, extra = self._command(build_dir, Path(vcd).resolve() if vcd else None)
        env.update(extra)
        say(f"starting the {self.label} simulator")
        self.sock: socket.socket | None = None
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    argv, env=env, cwd=self.test_dir, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
            self._finalizer = weakref.finalize(self, _end, self.proc, None, self.run)
            self.sock = self._accept(listener)
        finally:
            listener.close()
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _end, self.proc, self.sock, self.run)
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline
        self.answer_limit = answer_limit(config)
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

    def _log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no simulator log)"
        return "\n".join(text[-lines:])

    def _accept(self, listener: Listener) -> socket.socket:
        """The simulator's connection (others that reach the socket first are refused)."""
        def alive() -> None:
            if self.proc.poll() is not None:
                self._fail(f"the {self.label} simulator {self._exited()} "
                           f"before connecting; log {self.log_path}:\n{self._log_tail()}")

        try:
            return listener.accept(self.proc.pid, time.monotonic() + START_TIMEOUT, alive)
        except TimeoutError:
            refused = (f"; refused {len(listener.refused)} other connection(s): "
                       f"{'; '.join(listener.refused[:3])}" if listener.refused else "")
            self._fail(f"the {self.label} simulator did not connect within "
                       f"{START_TIMEOUT:.0f} s{refused}; log {self.log_path}:\n{self._log_tail()}")
        raise AssertionError("unreachable")

    def _exited(self) -> str:
        """How the simulator ended, for messages (a file-size limit kills it by SIGXFSZ)."""
        code = self.proc.returncode
        if code == -signal.SIGXFSZ:
            wrote = f", such as its waves {self.waves}," if self.waves else ""
            return (f"was killed by SIGXFSZ (a file it wrote{wrote} reached the file-size "
                    "limit, ulimit -f)")
        return f"exited with code {code}"

    def _lose(self, reason: str) -> str:
        """Mark the session lost (its run folder is kept, and named) and stop the simulator."""
        if str(self.test_dir) not in reason:
            reason += f" (run folder kept: {self.test_dir})"
        self.dead = reason
        self.run.failed = True
        _terminate(self.proc, self.sock)
        return reason

    def _fail(self, reason: str) -> None:
        raise RuntimeError(self._lose(reason))

    def _next_line(self) -> bytes | None:
        """The next whole line of the receive buffer, or None (ProtocolError past the limit)."""
        newline = self._buffer.find(b"\n", self._scanned)
        if (newline if newline >= 0 else len(self._buffer)) > self.answer_limit:
            raise ProtocolError(f"the {self.label} simulator sent a line of more than "
                                f"{self.answer_limit} bytes")
        if newline < 0:
            self._scanned = len(self._buffer)
            return None
        line = bytes(self._buffer[:newline])
        del self._buffer[:newline + 1]
        self._scanned = 0
        return line

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        """An answer line as an object; None for a progress line (passed on)."""
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"the {self.label} simulator sent a line that is not JSON "
                                f"({type(exc).__name__}): {line[:80]!r}") from None
        if not isinstance(msg, dict):
            raise ProtocolError(f"the {self.label} simulator sent {line[:80]!r}, not an object")
        if "progress" not in msg:
            return msg
        report = msg["progress"]
        if not (isinstance(report, list) and len(report) == 2
                and all(type(v) is int for v in report)):
            raise ProtocolError(f"the {self.label} simulator sent a progress line "
                                f"{line[:80]!r}, not [cycle, operations]")
        if self.progress is not None:
            self.progress(*report)
        return None

    def _receive(self, deadline: float, op: str) -> dict[str, Any]:
        """The next answer line; progress lines are passed on; bounded by ``deadline``."""
        assert self.sock is not None
        timeout = max(deadline - time.monotonic(), 0.0)
        while True:
            line = self._next_line()
            if line is not None:
                msg = self._parse(line)
                if msg is not None:
                    return msg
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"the {self.label} simulator did not answer {op!r} within "
                           f"{timeout:.0f} s (hung?); it was stopped. Log {self.log_path}")
            ready, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if ready:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    self.proc.poll()
                    self._fail(f"the {self.label} simulator closed the connection during {op!r} "
                               f"({self._exited()}); log {self.log_path}:\n"
                               f"{self._log_tail()}")
                self._buffer += chunk
            elif self.proc.poll() is not None:
                self._fail(f"the {self.label} simulator {self._exited()} "
                           f"during {op!r}; log {self.log_path}:\n{self._log_tail()}")

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Execute one operation; ``{"error": ..., "fatal": True}`` if the simulator is lost.

        Answers of earlier requests whose caller was interrupted are drained and dropped
        first (the simulator finished those operations, in order). If an interrupt came while
        a request was being sent, the stream is no longer framed: the session is closed and
        every later request gets a fatal error saying so.
        """
        if not self.dead and self._sending:
            self._lose(f"the {self.label} session was interrupted while sending a request "
                       "and cannot be resynchronised; close this Context and open a new one")
        if self.dead:
            return {"error": self.dead, "fatal": True}
        assert self.sock is not None
        wire, seq, deadline = self.exchange.open(msg, timeout)
        op = str(msg.get("op"))
        try:
            self._sending = True
            self.sock.sendall(json.dumps(wire).encode() + b"\n")
            self._sending = False
            while True:
                answer = self._receive(deadline, op)
                if self.exchange.accept(answer, seq):
                    return answer
        except (RuntimeError, OSError) as exc:
            self.exchange.done(seq)
            if not self.dead:
                self._lose(f"lost the {self.label} simulator: {exc}")
            return {"error": self.dead, "fatal": True}

    def close(self, timeout: float = 30.0) -> None:
        """Stop the server (the VCD is flushed), wait for the process, kill it if it lingers;
        then remove the run folder, unless the session failed or ``$MNCORE_COSIM_KEEP_RUNS``
        is set."""
        if not self.dead and not self._sending and self.proc.poll() is None \
                and self.sock is not None:
            try:
                self.request({"op": "stop"}, timeout)
                self.proc.wait(timeout)
            except (RuntimeError, OSError, subprocess.TimeoutExpired):
                pass
        self._finalizer()
        self.dead = self.dead or "closed"


class IcarusDevice(RtlDevice):
    """``mncore2:icarus``: the memory system's RTL as Verilog, under cocotb on Icarus.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`. Raises
    DeviceNotAvailableError when Icarus (``vvp``) is not on PATH.
    """

    simulator = "icarus"

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None, calls: str | None = None,
                 wave_format: str | None = None):
        if shutil.which("vvp") is None:
            raise DeviceNotAvailableError(
                f"Device {name!r} needs Icarus Verilog (vvp), which is not on PATH; "
                "install it (apt-get install iverilog) or use mncore2:rtl")
        super().__init__(config, name, waves, calls, wave_format)

    def _open_session(self) -> IcarusSession:
        return IcarusSession(self.config, self.vcd_path, self._progress, self._say)
