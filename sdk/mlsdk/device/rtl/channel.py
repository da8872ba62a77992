"""The runtime's end of the simulator connection: JSON answer lines off a Unix socket.

Each answer is one line holding a JSON object; progress lines (``{"progress": [cycle, ops]}``)
are passed to a callback and skipped. Nothing is trusted: a line longer than the session's
limit, a line that is not JSON or not an object, or a malformed progress line is a
:class:`~.protocol.ProtocolError`; a simulator that closes the connection, exits, or does not
answer before the deadline is a :class:`SimulatorGone`. Either way the session is lost.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable
from typing import Any

from .protocol import ProtocolError

__all__ = ["AnswerChannel", "SimulatorGone"]


class SimulatorGone(RuntimeError):
    """The simulator closed the connection, exited, or did not answer in time (the message
    says which)."""


class AnswerChannel:
    """Answer lines from the simulator's socket.

    Parameters
    ----------
    label : str
        The simulator's name, for messages.
    limit : int
        Longest line accepted, in bytes.
    progress : callable, optional
        ``progress(cycle, operations_done)`` for each progress line.
    """

    def __init__(self, label: str, limit: int,
                 progress: Callable[[int, int], None] | None = None):
        self.label = label
        self.limit = limit
        self.progress = progress
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline

    @property
    def buffered(self) -> int:
        """Bytes received and not yet taken as lines."""
        return len(self._buffer)

    @staticmethod
    def send(sock: socket.socket, msg: dict[str, Any]) -> None:
        """Send one request line on ``sock``."""
        sock.sendall(json.dumps(msg).encode() + b"\n")

    def _next_line(self) -> bytes | None:
        """The next whole line of the receive buffer, or None (ProtocolError past the limit)."""
        newline = self._buffer.find(b"\n", self._scanned)
        if (newline if newline >= 0 else len(self._buffer)) > self.limit:
            raise ProtocolError(f"the {self.label} simulator sent a line of more than "
                                f"{self.limit} bytes")
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

    def receive(self, sock: socket.socket, deadline: float, op: str,
                ended: Callable[[float], str | None]) -> dict[str, Any]:
        """The next answer line off ``sock``; progress lines are passed on; bounded by
        ``deadline``.

        ``ended(wait)`` says how the simulator ended, waiting up to ``wait`` seconds for it
        (None while it runs). Raises
        :class:`SimulatorGone` or :class:`~.protocol.ProtocolError`.
        """
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
                raise SimulatorGone(f"the {self.label} simulator did not answer {op!r} within "
                                    f"{timeout:.0f} s (hung?); it was stopped")
            ready, _, _ = select.select([sock], [], [], min(left, 0.5))
            if ready:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise SimulatorGone(f"the {self.label} simulator closed the connection "
                                        f"during {op!r} ({ended(2.0) or 'it still runs'})")
                self._buffer += chunk
            else:
                how = ended(0.0)
                if how is not None:
                    raise SimulatorGone(f"the {self.label} simulator {how} during {op!r}")
