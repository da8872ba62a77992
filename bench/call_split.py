"""Where a compiled call's wall time goes on the functional model: a per-call split by role.

:class:`CallSplit` wraps the hooks of one :class:`mlsdk.device.functional.FunctionalDevice`
(instance attributes shadowing the class's methods, so nothing outside the bench changes) and
charges the time spent inside each to its role, exclusively: a hook called from another's body
charges its own role, not the caller's. The roles:

- ``interpreter``: the programs' ``run`` (the IR interpreter, the PE array functionally);
- ``DRAM model``: Launch loads and stores, conversions, the DRAM store's views and flushes;
- ``cycle model``: the analytic timing (memory streams, compute, converter bytes);
- ``host copies``: host writes into DRAM and host reads out of it (``.cpu()``);
- ``front end``: the rest of the call (the Session, staging checks, proxies), what the wall
  time leaves over.

The wrappers cost about a microsecond a hook; the bench times its ratio on calls without them
and takes the split from calls of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["CallSplit", "ROLES"]

ROLES = ("interpreter", "DRAM model", "cycle model", "host copies")

_HOOKS = {
    "_load_reads": "DRAM model",
    "_load_input": "DRAM model",
    "_dram_store": "DRAM model",
    "_store_outputs": "DRAM model",
    "_convert": "DRAM model",
    "_dram_read": "DRAM model",
    "_stream_cycles": "cycle model",
    "_compute_cycles": "cycle model",
    "_converter_moved": "cycle model",
    "_before_run": "DRAM model",
    "_read_tensor": "host copies",
    "_host_write": "host copies",
    "_dram_write": "host copies",
}
_STORE_HOOKS = ("flush", "view", "read", "writable", "store_deferred")


class CallSplit:
    """Seconds per role, accumulated over the calls made while :meth:`install` ed."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds = dict.fromkeys(ROLES, 0.0)
        self._stack: list[str] = []
        self._since = 0.0

    def install(self, device: Any) -> None:
        """Wrap ``device``'s hooks, its DRAM store's and its loaded programs' ``run``."""
        for name, role in _HOOKS.items():
            self._wrap(device, name, role)
        for name in _STORE_HOOKS:
            self._wrap(device.dram, name, "DRAM model")
        for program in device.programs.values():
            self._wrap(program, "run", "interpreter")

    def reset(self) -> None:
        self.seconds = dict.fromkeys(ROLES, 0.0)

    def _wrap(self, owner: Any, name: str, role: str) -> None:
        original: Callable[..., Any] | None = getattr(owner, name, None)
        if original is None:  # a hook this version of the device does not have
            return
        enter, leave = self._enter, self._leave

        def timed(*args: Any, **kwargs: Any) -> Any:
            enter(role)
            try:
                return original(*args, **kwargs)
            finally:
                leave()
        setattr(owner, name, timed)

    def _enter(self, role: str) -> None:
        now = self.clock()
        if self._stack:
            self.seconds[self._stack[-1]] += now - self._since
        self._stack.append(role)
        self._since = now

    def _leave(self) -> None:
        now = self.clock()
        self.seconds[self._stack.pop()] += now - self._since
        self._since = now
