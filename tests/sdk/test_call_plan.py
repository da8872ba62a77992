"""A compiled function's call plan (mlsdk.call_plan) and a replayed read do what executing
the commands does.

Two Contexts run the same random sequence of calls, frees, reads, peeks, in-place changes of
the caller's tensors, bad inputs and training steps: one with call plans (the default), one
whose device replays nothing (``replays`` off: every command, reads included, built and
executed). After every step the two give the same results bit for bit, the same
errors, the same report records and totals, the same bindings, and, where a step asks, the
same DRAM page for page: a plan that diverged from the general path in anything observable
fails here. The plan must also have run (it is counted), so the comparison is never vacuous.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from mlsdk import Context, MNDevice, storage, trace_scope
from mlsdk.call_plan import CallPlan
from mlsdk.device.functional import layout_key
from mlsdk.errors import DeviceError, FunctionUnloadedError
from mncore_hdl.layout import from_device
from torch import nn

B, D, N = 8, 4, 10


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(N, 3)
        self.lin = nn.Linear(D, 3)

    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.emb(i)


class Pair:
    """The same functions compiled on one Context; ``plans`` False switches call plans off."""

    def __init__(self, tmp_path, plans: bool):
        torch.manual_seed(0)
        self.context = Context(MNDevice("mncore2:auto"))
        self.model = Net()
        self.context.registry.register("net", self.model)
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        sample = {"x": torch.zeros(B, D), "i": torch.zeros(B, dtype=torch.int64)}
        where = tmp_path / ("plan" if plans else "general")
        model = self.model
        self.f = self.context.compile(lambda d: {"y": model(d["x"], d["i"])}, sample,
                                      storage.path(where / "f"))
        self.g = self.context.compile(lambda d: {"x": d["z"] * 2}, {"z": torch.zeros(B, D)},
                                      storage.path(where / "g"),
                                      io_spec_constraints={"x": self.f.input_specs["x"]})

        def step(d):
            opt.zero_grad()
            loss = (model(d["x"], d["i"]) ** 2).mean()
            loss.backward()
            opt.step()
            return {"loss": loss}
        self.h = self.context.compile(step, sample, storage.path(where / "h"))
        self.functions = (self.f, self.g, self.h)
        if not plans:  # every command built and executed, reads included
            self.context.device.replays = False
        self.live: list = []
        self.last: dict = {}


def _batch(rng: random.Random) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    return {"x": torch.randn(B, D, generator=gen),
            "i": torch.randint(0, N, (B,), generator=gen)}


def _outcome(action):
    """What ``action()`` gave: its tensors (cloned) or its error's type and message."""
    try:
        got = action()
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        return ("error", type(exc).__name__, str(exc))
    if isinstance(got, dict):
        return {k: v.clone() for k, v in got.items()}
    return got


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _step(pair: Pair, op: str, batch: dict, rng_value: int):
    """One step on ``pair``; returns what it gave (compared across the two pairs)."""
    f, g, h = pair.f, pair.g, pair.h
    if op == "call":
        out = f(batch)
        pair.live.append(out["y"])
        pair.last = batch
        return {"y": out["y"].cpu()}
    if op == "call_same" and pair.last:
        return {"y": f(pair.last)["y"].cpu()}
    if op == "call_proxy":
        x = g({"z": batch["x"]})["x"]
        out = f({"x": x, "i": batch["i"]})
        pair.live.append(out["y"])
        return {"y": out["y"].cpu()}
    if op == "bad_dtype":
        return _outcome(lambda: f({"x": batch["x"].double(), "i": batch["i"]}))
    if op == "out_of_range":
        return _outcome(lambda: f({"x": batch["x"], "i": batch["i"] + (1 << 40)}))
    if op == "mutate" and pair.last:
        pair.last["x"].add_(1.0)  # the caller changes what it passed: the device keeps its copy
        pair.last["i"].fill_(rng_value % N)
        return None
    if op == "free" and pair.live:
        pair.live.pop(rng_value % len(pair.live)).free()
        return None
    if op == "read" and pair.live:
        return {"y": pair.live[rng_value % len(pair.live)].cpu()}
    if op == "peek":
        return [pair.context.device.peek(buf) for buf in f.bindings.values()]
    if op == "snapshot":
        return pair.context.device.dram_snapshot()
    if op == "train":
        return {"loss": h(batch)["loss"].cpu()}
    if op == "reupload":  # the registry's copies dropped: the next use uploads them again
        pair.context.synchronize()
        pair.context.registry.invalidate()
        return None
    if op == "sync":
        pair.context.synchronize()
        return {n: p.detach().clone() for n, p in pair.model.named_parameters()}
    return None


def _compare(a, b, what: str) -> None:
    if isinstance(a, list) and a and isinstance(a[0], dict):  # snapshots
        assert len(a) == len(b), what
        for pages_a, pages_b in zip(a, b, strict=True):
            assert pages_a.keys() == pages_b.keys(), what
            for page in pages_a:
                assert np.array_equal(pages_a[page], pages_b[page]), f"{what}: page {page}"
    elif isinstance(a, list):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)), what
    else:
        assert _same(a, b), f"{what}: {a!r} != {b!r}"


def _report(pair: Pair):
    report = pair.context.report()
    return [r.to_dict() for r in report.records], report.totals


OPS = ("call", "call", "call_same", "call_proxy", "bad_dtype", "out_of_range", "mutate", "free",
       "read", "peek", "snapshot", "train", "sync", "reupload")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_call_plans_do_what_the_general_path_does(tmp_path, seed):
    rng = random.Random(seed)
    planned, general = Pair(tmp_path, True), Pair(tmp_path, False)
    runs = {"n": 0}
    real = CallPlan.run

    def counted(self, tensors):
        runs["n"] += 1
        return real(self, tensors)

    try:
        CallPlan.run = counted
        for index in range(40):
            op, value = rng.choice(OPS), rng.randrange(1 << 20)
            batch = _batch(rng)
            what = f"seed={seed} step {index} ({op})"
            # The same tensors to both: a step that changes them changes both alike.
            got = [_step(pair, op, batch, value) for pair in (planned, general)]
            _compare(got[0], got[1], what)
            assert _report(planned) == _report(general), what
            assert ({k: b.to_dict() for k, b in planned.f.bindings.items()}
                    == {k: b.to_dict() for k, b in general.f.bindings.items()}), what
    finally:
        CallPlan.run = real
        planned.context.close()
        general.context.close()
    assert runs["n"] > 0, f"seed={seed}: no call ran through a plan"
    # The comparison is against the general path only while that side never plans.
    assert all(fn.call_plan is None for fn in general.functions), seed


@pytest.fixture
def pair(tmp_path):
    got = Pair(tmp_path, True)
    yield got
    got.context.close()


def _plan_runs(fn, monkeypatch) -> list:
    runs: list = []
    real = CallPlan.run
    monkeypatch.setattr(CallPlan, "run", lambda self, t: runs.append(self) or real(self, t))
    return runs


def test_a_plan_is_made_by_a_host_call_and_taken_only_when_it_fits(pair, monkeypatch):
    f, g = pair.f, pair.g
    batch = _batch(random.Random(0))
    runs = _plan_runs(f, monkeypatch)
    f(batch)
    assert runs == [] and f.call_plan is not None  # the first call makes it
    f(batch)
    assert len(runs) == 1
    f({"x": batch["x"][:, :2].repeat(1, 2), "i": batch["i"]})  # same type, new values
    assert len(runs) == 2
    with pytest.raises(Exception, match="float64"):  # another type: the general path says so
        f({"x": batch["x"].double(), "i": batch["i"]})
    with pytest.raises(Exception, match="outside"):  # values its lanes cannot hold
        f({"x": batch["x"], "i": batch["i"] - (1 << 40)})
    assert len(runs) == 2
    f({"x": g({"z": batch["x"]})["x"], "i": batch["i"]})  # a relocation: binds x elsewhere
    assert len(runs) == 2
    assert f.bindings["x"] != f.call_plan.own["x"]
    f(batch)  # x bound elsewhere: the general path binds its own buffer back
    assert len(runs) == 2 and f.bindings["x"] == f.call_plan.own["x"]
    f(batch)
    assert len(runs) == 3


def test_a_traced_call_records_its_commands_and_skips_the_plan(pair, monkeypatch, tmp_path):
    batch = _batch(random.Random(0))
    pair.f(batch)
    runs = _plan_runs(pair.f, monkeypatch)
    with trace_scope(tmp_path / "t.pftrace"):
        pair.f(batch)
    assert runs == []
    pair.f(batch)
    assert len(runs) == 1


def test_an_unloaded_function_and_a_closed_context_refuse_a_planned_call(pair):
    batch = _batch(random.Random(0))
    pair.f(batch)
    pair.f(batch)
    pair.f.unload()
    with pytest.raises(FunctionUnloadedError):
        pair.f(batch)
    pair.g({"z": batch["x"]})
    pair.g({"z": batch["x"]})
    pair.context.close()
    with pytest.raises(DeviceError, match="closed"):
        pair.g({"z": batch["x"]})


def test_a_program_loaded_again_under_the_name_is_launched_as_a_command(pair):
    """The replay holds the program it was made for; a device that has another under the name
    (unloaded behind the function's back) runs the Launch as a command, which says so."""
    batch = _batch(random.Random(0))
    pair.f(batch)
    device = pair.context.device
    device.unload_program(pair.f.key)
    live = len(device.allocator.live)
    with pytest.raises(DeviceError, match="no such program"):
        pair.f(batch)
    assert len(device.allocator.live) == live  # its output buffers given back


@pytest.mark.parametrize("large", [False, True])
def test_an_interrupted_planned_call_hands_nothing_out(pair, monkeypatch, large):
    batch = _batch(random.Random(0))
    f = pair.f
    device = pair.context.device
    if large:  # the dropped output's value lets go of its memory before the program runs
        device.recycle_bytes = 0
    want = f(batch)["y"].cpu()
    f(batch)["y"].cpu()  # a planned call: its output's place is where the next one goes
    live = len(device.allocator.live)
    program = device.programs[f.key]
    real = program.run

    def interrupted(values):
        raise KeyboardInterrupt

    monkeypatch.setattr(program, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        f(batch)
    monkeypatch.setattr(program, "run", real)
    assert device.lock.acquire_if_idle()
    device.lock.__exit__()
    assert len(device.allocator.live) == live
    entries = device.dram.decoded.entries
    assert all(entry.value is not None for entry in entries.values())  # none left vacated
    assert torch.equal(f(batch)["y"].cpu(), want)
    device.dram_snapshot()  # every write-back value can still be laid out


def test_the_caller_changing_an_int64_input_after_a_planned_call_changes_nothing(pair):
    f = pair.f
    batch = _batch(random.Random(0))
    f(batch)
    i = batch["i"].clone()
    x = batch["x"].clone()
    out = f({"x": x, "i": i})["y"]
    decoded = pair.context.device.dram.decoded
    key = (f.bindings["i"].id, layout_key(f.input_specs["i"].layout))
    assert decoded.is_dirty(key)  # kept write-back: a lazy clone of the caller's tensor
    want = out.cpu()
    i.fill_(N - 1)
    x.zero_()
    assert torch.equal(f({"x": batch["x"], "i": batch["i"]})["y"].cpu(), want)
    assert torch.equal(from_device(pair.context.device.peek(f.bindings["i"]),
                                   f.input_specs["i"].layout), batch["i"])


def test_a_planned_call_reads_registered_state_from_where_it_is_now(tmp_path, monkeypatch):
    """Registered state uploaded again (the registry's copies dropped after a training step
    and a synchronize) lives in new buffers: a planned inference binds the new ones."""
    planned, general = Pair(tmp_path, True), Pair(tmp_path, False)
    try:
        runs = _plan_runs(planned.f, monkeypatch)
        rng = random.Random(5)
        states = []
        for step in range(4):
            batch = _batch(rng)
            got = []
            for p in (planned, general):
                got.append({"y": p.f(batch)["y"].cpu(), "loss": p.h(batch)["loss"].cpu()})
                p.context.synchronize()
                p.context.registry.invalidate()
                p.g({"z": batch["x"]})  # takes memory, so the copies come back elsewhere
            _compare(got[0], got[1], f"step {step}")
            states.append(dict(planned.f.call_plan.state or {}))
        assert len([plan for plan in runs if plan is planned.f.call_plan]) == 3
        moved = [n for n in states[1] if states[1][n] != states[2][n]]
        assert moved, "no registered copy moved: the test does not test what it says"
        assert _report(planned) == _report(general)
    finally:
        planned.context.close()
        general.context.close()


def test_buffers_given_back_by_collected_outputs_do_not_pile_up(pair):
    """Every call's output proxy is collected and its buffer given back from the finalizer;
    the device forgets what they held at its next Launch, so the list stays short however
    many calls run (a Launch whose reads are all kept values decodes nothing)."""
    batch = _batch(random.Random(0))
    device = pair.context.device
    for _ in range(50):
        pair.f(batch)["y"].cpu()
    assert device.pending_releases <= 2


def test_a_function_with_a_plan_is_freed_when_its_last_user_drops_it(tmp_path):
    """The plan holds what the function holds, never the function: no reference cycle, so
    dropping the function gives its buffers back at once, without the garbage collector."""
    import gc

    with Context(MNDevice("mncore2:auto")) as context:
        fn = context.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.zeros(4, 8)},
                             storage.path(tmp_path / "f"))
        fn({"x": torch.ones(4, 8)})
        fn({"x": torch.ones(4, 8)})
        assert fn.call_plan is not None
        owner = f"function {fn.key} (inputs and constants)"
        assert owner in context.device.allocator.owners()
        gc.disable()
        try:
            del fn
            assert owner not in context.device.allocator.owners()
        finally:
            gc.enable()


@pytest.mark.parametrize("large", [False, True])
def test_repeated_calls_take_the_planned_paths_and_leave_what_commands_leave(tmp_path,
                                                                             monkeypatch,
                                                                             large):
    """The calls a loop makes: outputs dropped at once, outputs held one call longer (they
    take turns over two ranges), training steps storing their state where it was. The
    planned side takes its quick paths (a host input replacing the last one where it stands,
    an output taking over a dropped output's range, a state update in place; with every
    output counted ``large``, the dropped output's value letting go of its memory before the
    program runs), and after every step both sides agree on results, reports and DRAM page
    for page."""
    from mlsdk.device.decoded import DecodedCache

    taken = {"replace_dirty": 0, "rekey_alone": 0, "vacate": 0}
    planned, general = Pair(tmp_path, True), Pair(tmp_path, False)
    if large:  # read at a program's first Launch: none has run yet
        planned.context.device.recycle_bytes = general.context.device.recycle_bytes = 0
    for name in taken:
        real = getattr(DecodedCache, name)

        def counted(self, *args, real=real, name=name):
            done = real(self, *args)
            if done and self is planned.context.device.dram.decoded:
                taken[name] += 1
            return done
        monkeypatch.setattr(DecodedCache, name, counted)
    rng = random.Random(11)
    held: dict = {}
    try:
        for index in range(12):
            batch = _batch(rng)
            got = []
            for p in (planned, general):
                out = {"y": p.f(batch)["y"].cpu()}  # dropped at once
                kept = p.f(batch)["y"]  # held until the next step's call
                out["held"] = kept.cpu()
                held[p] = kept
                if index % 3 == 2:
                    out["loss"] = p.h(batch)["loss"].cpu()
                got.append(out)
            what = f"step {index}"
            _compare(got[0], got[1], what)
            _compare(planned.context.device.dram_snapshot(),
                     general.context.device.dram_snapshot(), what)
            assert _report(planned) == _report(general), what
    finally:
        planned.context.close()
        general.context.close()
    assert taken["replace_dirty"] > 0 and taken["rekey_alone"] > 0, taken
    assert (taken["vacate"] > 0) == large, taken
