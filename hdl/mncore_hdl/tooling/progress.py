"""Progress lines of the long build steps: the elapsed time, every few seconds, while one runs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["ticking", "TICK_S"]

#: Seconds between the progress lines of a long step.
TICK_S = 10.0


@contextlib.contextmanager
def ticking(say: Callable[[str], None], what: str | None, every: float = TICK_S,
            since: float | None = None, detail: Callable[[], str] = lambda: ""
            ) -> Iterator[None]:
    """Say ``what`` (unless None), then ``... N s`` (time since ``since``, default now, and
    ``detail()``) every ``every`` seconds until the step ends, then how long it took (a step
    of under a second says nothing more; one with a ``since`` leaves that to its caller)."""
    if what is not None:
        say(what)
    start = time.monotonic() if since is None else since
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            more = detail()
            say(f"  ... {time.monotonic() - start:.0f} s" + (f" ({more})" if more else ""))

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
    took = time.monotonic() - start
    if since is None and took >= 1.0:
        say(f"  done in {took:.0f} s")
