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

Run as a script, it prints one small model's inference call (``bench_models.py --small``'s
models) step by step: each hook's own time per call, and the front end's steps (the input
checks and layout, the output buffers' allocation and release, the records, the commands'
dispatch, the proxies) as roles of their own::

    python bench/call_split.py [--model recsys] [--calls 2000]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
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
    "_write_host_tensor": "host copies",
    "_write_planned": "host copies",
    "_run_planned": "DRAM model",
    "_dram_write": "host copies",
}
_STORE_HOOKS = ("flush", "view", "read", "writable", "store_deferred")


class CallSplit:
    """Seconds per role, accumulated over the calls made while :meth:`install` ed."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 by_hook: bool = False) -> None:
        self.clock = clock
        #: Charge each hook to a role of its own name (``DRAM model: _load_reads``).
        self.by_hook = by_hook
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
        if self.by_hook:
            role = f"{role}: {name}"
            self.seconds.setdefault(role, 0.0)
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


#: The front end's steps a detailed split (``by_hook``) times apart: (what, attribute, role).
_FRONT_END = (
    ("function", "_plan", "inputs checked and laid out"),
    ("plan", "match", "inputs checked: types, int64 ranges"),
    ("device", "allocate", "output buffers allocated"),
    ("allocator", "release", "output buffers released"),
    ("session", "new_record", "records"),
    ("session", "execute", "commands dispatched"),
    ("device", "_execute", "commands dispatched"),
    ("device", "_launch", "Launch"),
    ("storage", "read", ".cpu()"),
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one small model's inference call, step by "
                                                 "step (exclusive microseconds per call)")
    parser.add_argument("--model", default="recsys", help="a bench_models.py --small model")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_models as bm  # here: it imports this module
    import torch
    from mlsdk import Context, MNDevice, storage
    from mlsdk import call_plan as call_plan_module
    from mlsdk import compiled as compiled_module
    from mlsdk import stores as stores_module

    torch.set_num_threads(1)
    case = bm.make_case(args.model, "small")
    model = copy.deepcopy(case.model).eval()
    with Context(MNDevice("mncore2:auto")) as context, tempfile.TemporaryDirectory() as tmp:
        context.registry.register("model", model)
        fn = context.compile(bm._functions(case, model, None), case.batch,
                             storage.path(Path(tmp) / "infer"))

        def call() -> None:
            for value in fn(case.batch).values():
                value.cpu()

        for _ in range(20):
            call()
        start = time.process_time()
        for _ in range(args.calls):
            call()
        whole = (time.process_time() - start) / args.calls
        timer = CallSplit(time.process_time, by_hook=True)
        timer.install(context.device)
        owners = {"function": fn, "plan": fn.call_plan, "device": context.device,
                  "session": context.session,
                  "allocator": context.device.allocator,
                  "storage": stores_module.DeviceStorage}
        for owner, name, role in _FRONT_END:
            timer._wrap(owners[owner], name, f"front end ({role})")
        timer._wrap(compiled_module, "TensorProxy", "front end (output proxies)")
        timer._wrap(call_plan_module, "TensorProxy", "front end (output proxies)")
        start = time.process_time()
        for _ in range(args.calls):
            call()
        timed = (time.process_time() - start) / args.calls
    print(f"{args.model} inference, one call with .cpu(): {whole * 1e6:.1f} us uninstrumented, "
          f"{timed * 1e6:.1f} us with the hooks timed (process time, {args.calls} calls)")
    spent = {role: s / args.calls * 1e6 for role, s in timer.seconds.items() if s}
    for role, us in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {us:7.1f} us  {role}")
    print(f"  {timed * 1e6 - sum(spent.values()):7.1f} us  the rest (the call's own Python)")


if __name__ == "__main__":
    main()
