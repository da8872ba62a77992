"""The functional model's write-back Launch outputs against an eager model: whatever looks at
DRAM (peek, HostRead, snapshot, Convert, Launch reads in any layout, partial and full writes,
free and reuse) sees the same bytes, and every command the same cycles and bytes."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsdk import Context, MNDevice, storage
from mlsdk.device.base import LoadedProgram
from mlsdk.device.commands import Convert, HostRead, HostWrite, Launch
from mlsdk.device.decoded import DecodedCache
from mlsdk.device.dram import DramStore
from mlsdk.device.functional import FunctionalDevice
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import (
    DTYPES,
    Layout,
    LayoutError,
    conversion,
    from_device,
    host_layout,
    native_layout,
    to_device,
)
from mncore_hdl.layout.random_layouts import random_layout

OPS = ("launch", "peek", "read", "read_layout", "reuse", "convert", "partial", "snapshot",
       "upload", "chain")


def _tensor(layout: Layout, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(layout.shape, generator=gen).to(getattr(torch, layout.dtype))


def _program(name: str, run, inputs: dict[str, Layout], outputs: dict[str, Layout]):
    return LoadedProgram(name=name, graph=None, layouts=dict(inputs), output_layouts=outputs,
                         inputs=tuple(inputs), outputs=tuple(outputs), constants=(), run=run)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and a.is_contiguous() and b.is_contiguous()
                and np.array_equal(a.view(-1).view(torch.uint8).numpy(),
                                   b.view(-1).view(torch.uint8).numpy()))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _flip(values: dict) -> dict:
    return {"y": values["x"].flip(0), "z": values["x"].clone()}


class _Pair:
    """The same commands on a write-back device and on an eager one (no decoded cache)."""

    def __init__(self, a: Layout, b: Layout, recycle: bool = False):
        self.eager = FunctionalDevice(MNCORE2, "mncore2:auto")
        self.eager.dram.decoded = DecodedCache(0)
        self.back = FunctionalDevice(MNCORE2, "mncore2:auto")
        if recycle:  # every output forgets a freed buffer's value over it before the run
            self.back.recycle_bytes = 0
        self.devices = (self.back, self.eager)
        self.a, self.b = a, b
        for d in self.devices:
            d.load_program(_program("p", _flip, {"x": a}, {"y": b, "z": a}))
            d.load_program(_program("q", lambda v: {"w": v["y"].clone()}, {"y": b}, {"w": a}))
        self.bufs = {name: self.both(lambda d, lay=lay: d.allocate(lay))
                     for name, lay in (("x", a), ("y", b), ("z", a), ("w", a))}

    def both(self, action):
        got = [action(d) for d in self.devices]
        return got[0]  # the allocators run in step: both give the same buffer

    def check(self, action) -> None:
        back, eager = (action(d) for d in self.devices)
        assert _same(back, eager), f"write-back {back!r} != eager {eager!r}"

    def run(self, command) -> None:
        outcomes = [_outcome(d, command) for d in self.devices]
        if any(isinstance(o, Exception) for o in outcomes):
            # A command both refuse (a conversion the converter cannot program) must fail
            # alike on both, and leave both DRAMs alike (the final snapshots compare them).
            back_exc, eager_exc = outcomes
            assert (type(back_exc), str(back_exc)) == (type(eager_exc), str(eager_exc))
            return
        back, eager = outcomes
        assert back.to_dict() == eager.to_dict()
        if back.data is not None or eager.data is not None:
            assert np.array_equal(back.data, eager.data)
        if command.__class__ is HostRead and command.layout is not None:
            assert _same(back.tensor, eager.tensor)

    def snapshots(self) -> None:
        back, eager = self.back.dram_snapshot(), self.eager.dram_snapshot()
        assert [sorted(g) for g in back] == [sorted(g) for g in eager]
        for group_b, group_e in zip(back, eager, strict=True):
            assert all(np.array_equal(group_b[p], group_e[p]) for p in group_b)


def _outcome(device, command):
    try:
        return device.execute(command)
    except Exception as exc:  # compared between the two devices by the caller
        return exc


def _step(pair: _Pair, op: str, seed: int) -> None:
    bufs, a, b = pair.bufs, pair.a, pair.b
    if op == "launch":
        pair.run(Launch("p", {"x": bufs["x"]}, {"y": bufs["y"], "z": bufs["z"]}))
    elif op == "chain":  # a Launch reading a write-back output
        pair.run(Launch("q", {"y": bufs["y"]}, {"w": bufs["w"]}))
    elif op == "peek":
        pair.check(lambda d: d.peek(bufs["y"]))
    elif op == "read":
        pair.run(HostRead(bufs["z"]))
    elif op == "read_layout":
        pair.run(HostRead(bufs["y"], b))
    elif op == "reuse":  # free y and take its place with a buffer of the other layout
        for d in pair.devices:
            d.free(bufs["y"])
        layout = a if seed % 2 else b
        bufs["y"] = pair.both(lambda d: d.allocate(layout))
        if layout is not b:
            bufs["y"] = pair.both(lambda d: d.allocate(b))
    elif op == "convert":
        try:
            desc = conversion(b, a)
        except LayoutError:
            return
        pair.run(Convert(bufs["y"], str(b), bufs["w"], str(a), desc, a.dtype))
    elif op == "partial":  # a write over part of z's range, from before it to inside it
        buf = bufs["z"]
        count = max(1, buf.lw_per_group // 2)
        start = max(0, buf.address - 3)
        words = np.arange(seed, seed + count, dtype=np.uint64)
        for d in pair.devices:
            d.drams[buf.group].write(start, words)
    elif op == "snapshot":
        pair.snapshots()
    elif op == "upload":
        pair.run(HostWrite(bufs["x"], to_device(_tensor(a, seed), a)))


@st.composite
def _layouts(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 24), min_size=rank, max_size=rank)))
    rng = draw(st.randoms(use_true_random=False))
    return random_layout(rng, shape, dtype), random_layout(rng, shape, dtype)


@settings(max_examples=60, deadline=None)
@given(_layouts(), st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1 << 20)),
                            min_size=1, max_size=14), st.booleans())
def test_write_back_matches_an_eager_model_over_random_command_sequences(layouts, steps,
                                                                        recycle):
    a, b = layouts
    pair = _Pair(a, b, recycle)
    pair.run(HostWrite(pair.bufs["x"], to_device(_tensor(a, 7), a)))
    for op, seed in [("launch", 0), *steps]:
        _step(pair, op, seed)
    pair.snapshots()
    for name in ("x", "y", "z", "w"):
        pair.check(lambda d, n=name: d.peek(pair.bufs[n]))


def test_a_full_overwrite_drops_a_write_back_value_and_a_partial_one_lays_it_out_first():
    store = DramStore(1, 1 << 12)
    layout = None  # never laid out here: the flush is observed instead
    laid: list[tuple] = []
    store.decoded.flush = lambda entry: laid.append(entry.span)
    value = torch.arange(16.0)
    assert store.store_deferred("k", 0, 1, 64, 8, value, layout)
    assert store.decoded.dirty == 1
    store.write(0, 60, np.zeros((1, 16), np.uint64))  # covers 64..72: no lay-out needed
    assert laid == [] and store.decoded.dirty == 0 and len(store.decoded) == 0
    assert store.store_deferred("k", 0, 1, 64, 8, value, layout)
    store.write(0, 68, np.zeros((1, 8), np.uint64))  # half of it: laid out, then overwritten
    assert laid == [(0, 1, 64, 8)] and len(store.decoded) == 0
    assert store.store_deferred("k", 0, 1, 64, 8, value, layout)
    store.view(0, 1, 0, 100)  # any look at the range lays it out, and keeps it (clean)
    assert laid[-1] == (0, 1, 64, 8) and store.decoded.dirty == 0 and len(store.decoded) == 1


def test_freeing_keeps_a_write_back_value_until_its_range_is_seen():
    device = FunctionalDevice(MNCORE2, "mncore2:auto")
    x = torch.randn(8, 64)
    layout, to_layout = host_layout(x.shape), native_layout(x.shape)
    device.load_program(_program("p", lambda v: {"y": v["x"] * 3}, {"x": layout},
                                 {"y": to_layout}))
    xb, yb = device.allocate(layout), device.allocate(to_layout)
    device.execute(HostWrite(xb, to_device(x, layout)))
    device.execute(Launch("p", {"x": xb}, {"y": yb}))
    assert device.dram.decoded.dirty == 1
    device.free(yb)  # freed DRAM keeps its bytes: so does the write-back value
    assert device.dram.decoded.dirty == 1
    snap = device.dram_snapshot()
    assert device.dram.decoded.dirty == 0
    image = np.concatenate([snap[g][0][yb.address:yb.address + yb.lw_per_group][None]
                            for g in range(yb.group, yb.group + yb.groups)])
    assert torch.equal(from_device(image, to_layout), x * 3)


def test_cpu_hands_out_a_copy_the_caller_owns(tmp_path):
    with Context(MNDevice("mncore2:auto")) as ctx:
        fn = ctx.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(64, 64)},
                         storage.path(tmp_path / "f"))
        out = fn({"x": torch.ones(64, 64)})["y"]
        first = out.cpu()
        first.add_(5)  # the caller's own tensor: the device's data is unchanged
        assert torch.equal(out.cpu(), torch.full((64, 64), 2.0))
        assert torch.equal(from_device(ctx.device.peek(out.buffer), out.spec.layout),
                           torch.full((64, 64), 2.0))


def _session(tmp_path, limit: int) -> list[dict]:
    x = torch.randn(96, 80)
    with Context(MNDevice("mncore2:auto")) as ctx:
        ctx.device.dram.decoded = DecodedCache(limit)
        fn = ctx.compile(lambda d: {"y": d["x"].t() * 2 + 1}, {"x": x},
                         storage.path(tmp_path / f"f{limit}"))
        g = ctx.compile(lambda d: {"z": d["y"] - 1}, {"y": torch.zeros(80, 96)},
                        storage.path(tmp_path / f"g{limit}"))
        y = fn({"x": x})["y"]
        z = g({"y": y})["z"]  # a conversion of y's bytes (its write-back value laid out)
        assert torch.equal(z.cpu(), (x.t() * 2 + 1) - 1)
        assert torch.equal(y.cpu(), x.t() * 2 + 1)
        return [r.to_dict() for r in ctx.report().records]


def test_call_results_and_report_do_not_depend_on_write_back(tmp_path):
    assert _session(tmp_path, 1 << 30) == _session(tmp_path, 0)  # write-back vs eager


class _TwoBuffers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.arange(64.0))
        self.register_buffer("b", -torch.arange(64.0))


def test_state_swapped_through_dram_views_keeps_both_values(tmp_path):
    """A step that swaps two registered buffers stores each one's update as the other's old
    value: a view of DRAM (row-major layouts decode as views) that the first store overwrites
    unless the device copies it first (``_own_outputs``); the front end copies nothing."""
    pair = _TwoBuffers()

    def swap(d):
        old = pair.a.clone()
        pair.a.copy_(pair.b)
        pair.b.copy_(old)
        return {"y": d["x"] + 1}

    with Context(MNDevice("mncore2:auto")) as ctx:
        ctx.registry.register("pair", pair)
        fn = ctx.compile(swap, {"x": torch.zeros(4)}, storage.path(tmp_path / "swap"))
        for step in range(3):
            fn({"x": torch.zeros(4)})
            ctx.synchronize()
            sign = -1.0 if step % 2 == 0 else 1.0
            torch.testing.assert_close(pair.a, sign * torch.arange(64.0))
            torch.testing.assert_close(pair.b, -sign * torch.arange(64.0))
