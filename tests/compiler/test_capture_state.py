"""torch's process-wide compiling/exporting flags around capture: set while a trace runs, put
back after it whatever happens, and after two traces in two threads that end out of order
(issue 38, the Hugging Face capture path)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.compiler as tc
from mlsdk import MLSDKError, storage
from mncore_compiler.capture import capture
from mncore_compiler.errors import CompilerError


def _flags() -> tuple[bool, bool]:
    return tc.is_compiling(), tc.is_exporting()


@pytest.mark.parametrize("error", [RuntimeError, KeyError, ValueError, ZeroDivisionError])
def test_an_exception_inside_tracing_leaves_the_flags_clear(context, tmp_path, error):
    seen = []

    def bad(inputs):
        seen.append(_flags())  # what Hugging Face's mask code branches on
        raise error("boom inside tracing")

    with pytest.raises((error, CompilerError, MLSDKError)):
        context.compile(bad, {"x": torch.randn(4)}, storage.path(tmp_path / "bad"))
    assert seen and seen[0] == (True, True)
    assert _flags() == (False, False)


def test_two_captures_in_two_threads_never_leave_the_flags_set():
    """The compiler's own API from two threads: A starts tracing and gives B 2 s to start
    too; traced at once, A ending first would restore the flags under B, and B ending last
    would leave them set for the rest of the process. Traces are one at a time instead, each
    with the flags set, and they are clear after both."""
    a_in, b_in = threading.Event(), threading.Event()
    inside: dict[str, list] = {"a": [], "b": []}
    running: list[int] = [0, 0]  # now, most at once
    lock = threading.Lock()
    errors = []

    def traced(name, body):
        def fn(inputs):
            with lock:
                running[0] += 1
                running[1] = max(running)
            try:
                body()
                inside[name].append(_flags())
                return {"y": inputs["x"] + 1}
            finally:
                with lock:
                    running[0] -= 1
        return fn

    def in_a():
        a_in.set()
        b_in.wait(2)

    def in_b():
        b_in.set()

    def run(fn):
        try:
            capture(fn, {"x": torch.ones(4)})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=run, args=(traced("a", in_a),))
    first.start()
    assert a_in.wait(60)
    second = threading.Thread(target=run, args=(traced("b", in_b),))
    second.start()
    for thread in (first, second):
        thread.join(120)
    assert not errors, errors
    assert inside["a"] and inside["b"]
    assert set(inside["a"] + inside["b"]) == {(True, True)}
    assert running[1] == 1
    assert _flags() == (False, False)


def test_an_eager_call_after_capture_sees_the_flags_clear(context, tmp_path):
    context.compile(lambda i: {"y": i["x"] - 1}, {"x": torch.ones(4)},
                    storage.path(tmp_path / "c"))
    assert _flags() == (False, False)
