"""The simulator connection: a Unix socket in a private folder, answered only by its own simulator.

The runtime (:class:`Listener`) binds ``cosim.sock`` in the session's run folder (mode 0700, so
no other user can reach it) and gives the simulator the socket's path and a fresh per-session
secret through the environment (never argv, which every local user can read in ``ps``). A
connection is taken as the simulator only when the OS says its peer runs under this user in the
simulator's own process group (``SO_PEERCRED``, where the OS has it) and its first line is the
secret. Anything else is closed before a byte is sent to it, and the runtime keeps waiting for
the real simulator. The simulator's side is
:func:`mlsdk.device.rtl.simulator.connect.connect_to_runtime`.
"""

from __future__ import annotations

import hmac
import os
import secrets
import select
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ...settings import SDK

__all__ = ["Listener", "SOCKET_ENV", "TOKEN_ENV"]

#: Environment variables that carry the socket's path and the session's secret to the simulator.
SOCKET_ENV = SDK["MNCORE_COSIM_SOCKET"].name
TOKEN_ENV = SDK["MNCORE_COSIM_TOKEN"].name
#: Seconds a connection that passed the peer check may take to present the secret.
HELLO_TIMEOUT = 10.0
#: Longest socket path bound in the run folder (``sun_path`` holds 108 bytes on Linux, 104 on
#: macOS); a longer one goes to a private temporary folder instead.
MAX_SOCKET_PATH = 100


class Listener:
    """The runtime's end: a listening Unix socket that accepts only the session's simulator.

    Parameters
    ----------
    folder : Path
        A folder only this user can enter (the session's run folder, mode 0700).
    """

    def __init__(self, folder: Path):
        self._scratch: str | None = None
        path = folder / "cosim.sock"
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            self._scratch = tempfile.mkdtemp(prefix="mncore-cosim-")  # mode 0700
            path = Path(self._scratch) / "cosim.sock"
        self.path = path
        self.token = secrets.token_hex(32)
        #: Connections refused so far (their peer, or why), for messages and tests.
        self.refused: list[str] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(path))
            self.sock.listen(8)
        except OSError:
            self.close()
            raise

    def env(self) -> dict[str, str]:
        """The simulator's environment entries that name the socket and carry the secret."""
        return {SOCKET_ENV: str(self.path), TOKEN_ENV: self.token}

    def accept(self, group: int, deadline: float, check: Callable[[], None]) -> socket.socket:
        """The first connection from the simulator (process group ``group``) with the secret.

        ``check()`` runs about twice a second and raises when the simulator is gone; a
        ``TimeoutError`` is raised at ``deadline``. Other connections are closed unanswered.
        """
        while time.monotonic() < deadline:
            check()
            ready, _, _ = select.select([self.sock], [], [], 0.5)
            if not ready:
                continue
            conn, _ = self.sock.accept()
            refusal = _peer_refusal(conn, group) or _hello_refusal(conn, self.token)
            if refusal is None:
                conn.settimeout(None)
                return conn
            self.refused.append(refusal)
            conn.close()
        raise TimeoutError("no connection from the simulator before the deadline")

    def close(self) -> None:
        """Stop listening and remove the socket file (and its temporary folder, if any)."""
        self.sock.close()
        try:
            self.path.unlink()
        except OSError:
            pass
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _peer_refusal(conn: socket.socket, group: int) -> str | None:
    """Why the peer is not the simulator by the OS's account (None: it is, or cannot tell)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None  # no peer credentials here: the secret alone decides
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))
    if uid != os.getuid():
        return f"peer pid {pid} runs as uid {uid}, not {os.getuid()}"
    try:
        peer_group = os.getpgid(pid)
    except OSError:
        return f"peer pid {pid} is gone"
    if peer_group != group:
        return f"peer pid {pid} is in process group {peer_group}, not the simulator's {group}"
    return None


def _hello_refusal(conn: socket.socket, token: str) -> str | None:
    """Why the peer's first line is not the session's secret (None: it is)."""
    expected = token.encode() + b"\n"
    got = b""
    end = time.monotonic() + HELLO_TIMEOUT
    try:
        while len(got) < len(expected) and not got.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0:
                return "the peer did not present the session's secret in time"
            conn.settimeout(left)
            chunk = conn.recv(len(expected) - len(got))
            if not chunk:
                return "the peer closed the connection before presenting the secret"
            got += chunk
    except OSError as exc:
        return f"reading the peer's secret failed: {exc}"
    if not hmac.compare_digest(got, expected):
        return "the peer presented a wrong secret"
    return None
