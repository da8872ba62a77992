"""Requests and answers of a simulator session, matched by sequence number.

Every request a session sends carries ``"seq"``, a number that grows by one per request; the
simulator echoes it in its answer (and in its progress lines). A session reads answers in
order, so an answer for an *older* request is one whose caller went away: a KeyboardInterrupt
(Ctrl-C) raised while the caller waited. The simulator still finished that operation, in order,
before the next one; its answer is drained and dropped (:attr:`Exchange.on_dropped` sees it, so
the device can keep its own bookkeeping, e.g. counter baselines). An answer for a request that
was never sent, or was answered already, is a :class:`ProtocolError`: the session is then lost,
never trusted to return somebody else's answer. So is an answer that lacks a field its
operation returns, or holds the wrong kind of value there (:func:`check_answer`): the device
never indexes into an answer it has not checked.

:class:`Exchange` is that bookkeeping, shared by the socket sessions (Icarus, Verilator) and the
in-process Amaranth session.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from typing import Any

from mncore_hdl.contracts.converter import COUNTERS

from .driver import FILE_NAME

__all__ = ["Exchange", "ProtocolError", "Dropped", "check_answer", "ANSWER_FIELDS"]

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
        else (a newer or unknown seq, no seq), or an answer its operation cannot give
        (:func:`check_answer`), raises ProtocolError.
        """
        if not isinstance(answer, dict):
            raise ProtocolError(f"the {self.label} simulator answered {_show(answer)}, not a "
                                "JSON object")
        got = answer.get("seq")
        if type(got) is int and got in self._open:
            check_answer(self._open[got][0], answer, self.label)
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


#: What each operation's answer holds, its image inline (``data``; :func:`check_answer` takes
#: ``files`` instead when the request asked ``to_files``): field -> kind (``count``: a
#: non-negative int; ``words``: base64 of the LWs asked for; ``files``: plain file names, one
#: per Group read; ``beats``: ``[[read, write], ...]`` per Group; ``counters``: name -> count;
#: ``descriptor``: a buffer's placement or null; ``figures``: name -> a non-negative number).
ANSWER_FIELDS: dict[str, dict[str, str]] = {
    "write": {"cycles": "count", "port_beats": "beats"},
    "read": {"cycles": "count", "data": "words", "port_beats": "beats"},
    "convert": {"cycles": "count", "program_cycles": "count", "counters": "counters"},
    "bind": {"cycles": "count"},
    "lookup": {"descriptor": "descriptor"},
    "counters": {"counters": "counters"},
    "peek": {"data": "words"},
    "poke": {"count": "count"},
    "profile": {"profile": "figures"},
}
_DESCRIPTOR_FIELDS = ("group", "groups", "address", "lw_per_group")


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _words_asked(request: dict[str, Any]) -> int | None:
    """How many LWs a ``read`` or ``peek`` asked for (None: the request does not say)."""
    buf = request.get("buffer")
    if isinstance(buf, dict) and _count(buf.get("groups")) and _count(buf.get("lw_per_group")):
        return int(buf["groups"]) * int(buf["lw_per_group"])
    count = request.get("count")
    return count if isinstance(count, int) and _count(count) else None


def _rows_asked(request: dict[str, Any]) -> int | None:
    """How many files (one per row) a ``read`` or ``peek`` answers in."""
    buf = request.get("buffer")
    if isinstance(buf, dict):
        return int(buf["groups"]) if _count(buf.get("groups")) else None
    return 1


def _field_problem(kind: str, value: object, request: dict[str, Any]) -> str | None:
    """What is wrong with an answer field of ``kind`` (None: nothing)."""
    if kind == "count":
        return None if _count(value) else "a non-negative integer"
    if kind == "beats":
        ok = isinstance(value, list) and all(
            isinstance(g, list) and len(g) == 2 and all(map(_count, g)) for g in value)
        return None if ok else "a list of [read, write] beat counts per Group"
    if kind == "counters":
        ok = isinstance(value, dict) and all(isinstance(k, str) and _count(v)
                                             for k, v in value.items())
        if isinstance(value, dict) and request.get("op") == "convert":
            ok = ok and all(name in value for name in COUNTERS)
        return None if ok else "an object of counter name -> count"
    if kind == "files":
        asked = _rows_asked(request)
        wanted = f"a list of {asked if asked is not None else 'the'} plain file name(s)"
        if not (isinstance(value, list)
                and all(isinstance(n, str) and FILE_NAME.fullmatch(n) for n in value)):
            return wanted
        return wanted if asked is not None and len(value) != asked else None
    if kind == "figures":
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and type(v) in (int, float) and v >= 0 for k, v in value.items())
        return None if ok else "an object of name -> non-negative number"
    if kind == "descriptor":
        ok = value is None or (isinstance(value, dict) and sorted(value) == sorted(
            _DESCRIPTOR_FIELDS) and all(map(_count, value.values())))
        return None if ok else f"null or an object of {', '.join(_DESCRIPTOR_FIELDS)}"
    asked = _words_asked(request)
    try:  # kind == "words"
        size = len(base64.b64decode(value, validate=True)) if isinstance(value, str) else -1
    except (binascii.Error, ValueError):
        size = -1
    if size < 0 or size % 8 or (asked is not None and size != 8 * asked):
        return f"base64 of {asked if asked is not None else 'whole'} 64-bit words"
    return None


def check_answer(request: dict[str, Any], answer: dict[str, Any], label: str) -> None:
    """Raise ProtocolError unless ``answer`` holds what ``request``'s operation returns.

    An ``error`` answer needs only its message (a string); an operation not in
    :data:`ANSWER_FIELDS` is not checked further.
    """
    op = request.get("op")
    if "error" in answer:
        if not isinstance(answer["error"], str):
            raise ProtocolError(f"the {label} simulator's error for {op!r} is "
                                f"{_show(answer['error'])}, not a message")
        return
    for field, kind in ANSWER_FIELDS.get(str(op), {}).items():
        if field == "data" and request.get("to_files") and "data" not in answer:
            field, kind = "files", "files"
        if field not in answer:
            raise ProtocolError(f"the {label} simulator's answer to {op!r} has no {field!r} "
                                f"(fields: {sorted(answer)})")
        problem = _field_problem(kind, answer[field], request)
        if problem is not None:
            raise ProtocolError(f"the {label} simulator's answer to {op!r} holds "
                                f"{_show(answer[field])} in {field!r}, not {problem}")
