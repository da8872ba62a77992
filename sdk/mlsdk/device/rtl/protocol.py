"""Requests and answers of a simulator session, matched by sequence number.

Every request a session sends carries ``"seq"``, a number that grows by one per request; the
simulator echoes it in its answer (and in its progress lines). A session reads answers in
order, so an answer for an *older* request is one whose caller went away: a KeyboardInterrupt
(Ctrl-C) raised while the caller waited. The simulator still finished that operation, in order,
before the next one; its answer is drained and dropped (:attr:`Exchange.on_dropped` sees it, so
the device can keep its own bookkeeping, e.g. counter baselines). An answer for a request that
was never sent, or was answered already, is a :class:`ProtocolError`: the session is then lost,
never trusted to return somebody else's answer.

:class:`Exchange` is that bookkeeping, shared by the socket sessions (Icarus, Verilator) and the
in-process Amaranth session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["Exchange", "ProtocolError", "Dropped"]

#: ``on_dropped(request, answer)``: an interrupted request (without its data) and its answer.
Dropped = Callable[[dict[str, Any], dict[str, Any]], None]


class ProtocolError(RuntimeError):
    """An answer that matches no outstanding request (the session can no longer be trusted)."""


class Exchange:
    """The outstanding requests of one session.

    Parameters
    ----------
    label : str
        The simulator's name, for messages.

    Attributes
    ----------
    seq : int
        The number of the last request opened (0: the simulator's ``ready`` line).
    on_dropped : callable or None
        Called with ``(request, answer)`` for every answer of an interrupted request drained
        before a later answer.
    """

    def __init__(self, label: str):
        self.label = label
        self.seq = 0
        self.on_dropped: Dropped | None = None
        # seq -> (the request without its data, its deadline); sent, not answered yet.
        self._open: dict[int, tuple[dict[str, Any], float]] = {}

    @property
    def interrupted(self) -> bool:
        """True when an earlier request's caller went away before its answer arrived."""
        return bool(self._open)

    def open(self, msg: dict[str, Any], timeout: float) -> tuple[dict[str, Any], int, float]:
        """Number a request: return the message to send, its seq and its deadline.

        The deadline allows ``timeout`` seconds plus what interrupted requests still ahead of
        it in the simulator may take (their answers are drained first).
        """
        now = time.monotonic()
        owed = max((deadline - now for _, deadline in self._open.values()), default=0.0)
        deadline = now + max(owed, 0.0) + timeout
        self.seq += 1
        seq = self.seq
        self._open[seq] = ({k: v for k, v in msg.items() if k != "data"}, deadline)
        return {**msg, "seq": seq}, seq, deadline

    def accept(self, answer: dict[str, Any], seq: int) -> bool:
        """Whether ``answer`` is the one for request ``seq``.

        An older request's answer is dropped (``False``, after :attr:`on_dropped`); anything
        else (a newer or unknown seq, no seq) raises ProtocolError.
        """
        got = answer.get("seq")
        if got == seq and seq in self._open:
            # Answers come in order: an older request still open lost its answer to an
            # interrupt after it was read; it will never come now.
            for old in [s for s in self._open if s <= seq]:
                del self._open[old]
            return True
        if isinstance(got, int) and got < seq and got in self._open:
            request, _ = self._open.pop(got)
            if self.on_dropped is not None:
                self.on_dropped(request, answer)
            return False
        raise ProtocolError(
            f"the {self.label} simulator answered request {got!r} while request {seq} was "
            f"expected (outstanding: {sorted(self._open)}); the session is out of step")

    def done(self, seq: int) -> None:
        """Forget request ``seq`` (answered, or lost with the session)."""
        self._open.pop(seq, None)
