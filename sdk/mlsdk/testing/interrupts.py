"""A real Ctrl-C for tests: deliver SIGINT to this process after a delay."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["sigint_after"]


@contextmanager
def sigint_after(seconds: float) -> Iterator[None]:
    """Deliver a real SIGINT (Ctrl-C) to this process ``seconds`` from now.

    Python raises it as KeyboardInterrupt in the main thread, wherever that thread is then.
    """
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, old)
