"""Copy-on-write on the functional model: a host input is kept as a lazy clone of the caller's
tensor, and ``.cpu()`` hands out a lazy clone of the kept output (docs/model.md, "The copies
that remain"). Neither side ever sees the other's writes: the caller changing its input after
the call, or the tensor ``.cpu()`` gave it, leaves what the device holds (peek, snapshot, the
next read, the next Launch) as it was, and the device overwriting or freeing its buffers
leaves the caller's tensors as they were. Tensors that cannot be shared take the copy path."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsdk import storage
from mlsdk.device.commands import HostRead, HostWrite, Launch
from mlsdk.device.decoded import DecodedCache
from mlsdk.device.functional import FunctionalDevice, layout_key
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import DTYPES, from_device, host_layout, to_device
from mncore_hdl.layout.random_layouts import random_layout


def double(inputs):
    return {"y": inputs["x"] * 2}


def _compile(context, tmp_path, name="d", fn=double, sample=None):
    sample = torch.zeros(32, 64) if sample is None else sample
    return context.compile(fn, {"x": sample}, storage.path(tmp_path / name))


def _kept(context, buf, layout):
    """The tensor the device keeps for ``buf`` in ``layout`` (None if it keeps none)."""
    entry = context.device.dram.decoded.entries.get((buf.id, layout_key(layout)))
    return None if entry is None else entry.value


def _is_write_back(context, buf, layout) -> bool:
    return context.device.dram.decoded.is_dirty((buf.id, layout_key(layout)))


def _held(context, buf, layout) -> torch.Tensor:
    """What the buffer's DRAM bytes decode to (a peek: write-back values laid out first)."""
    return from_device(context.device.peek(buf), layout)


def _in_snapshot(context, buf, layout) -> torch.Tensor:
    """The buffer's bytes as a DRAM snapshot lists them, decoded."""
    snap = context.device.dram_snapshot()
    rows = []
    for g in range(buf.group, buf.group + buf.groups):
        row = np.zeros(context.device.config.dram_lw_per_group, np.uint64)
        for page, data in snap[g].items():
            row[page * len(data):(page + 1) * len(data)] = data
        rows.append(row[buf.address:buf.address + buf.lw_per_group])
    return from_device(np.stack(rows), layout)


@pytest.mark.parametrize("observe_first", [False, True])
def test_the_caller_changing_its_input_after_the_call_changes_nothing_on_the_device(
        context, tmp_path, observe_first):
    fn = _compile(context, tmp_path)
    x = torch.randn(32, 64)
    given_x = x.clone()
    out = fn({"x": x})["y"]
    buf, layout = fn.bindings["x"], fn.input_specs["x"].layout
    # Kept write-back, sharing the caller's memory (a lazy clone, not a copy).
    assert _is_write_back(context, buf, layout)
    assert _kept(context, buf, layout).const_data_ptr() == x.const_data_ptr()
    if observe_first:  # laid out into DRAM while still shared: the caller's tensor is read
        assert torch.equal(_held(context, buf, layout), given_x)
    x.add_(1)  # in place through torch
    x.numpy()[0, :3] = 99.0  # and through numpy
    assert torch.equal(_held(context, buf, layout), given_x)
    assert torch.equal(_in_snapshot(context, buf, layout), given_x)
    assert torch.equal(out.cpu(), given_x * 2)
    # A Launch that reads the input buffer again reads what it was given.
    device = context.device
    again = device.allocate(out.spec.layout)
    device.execute(Launch(fn.key, dict(fn.bindings), {"y": again}))
    read = device.execute(HostRead(again, out.spec.layout)).tensor
    assert torch.equal(read, given_x * 2)
    # The next call reads the caller's tensor as it is now.
    assert torch.equal(fn({"x": x})["y"].cpu(), x * 2)


def test_load_from_keeps_the_tensor_as_it_was_when_loaded(context, tmp_path):
    fn = _compile(context, tmp_path)
    proxies = fn.allocate_input_proxy()
    x = torch.randn(32, 64)
    given_x = x.clone()
    proxies["x"].load_from(x)
    buf, layout = proxies["x"].buffer, proxies["x"].spec.layout
    assert _kept(context, buf, layout).const_data_ptr() == x.const_data_ptr()  # shared
    x.mul_(3)
    assert torch.equal(fn(proxies)["y"].cpu(), given_x * 2)  # relocated: no host bytes
    assert torch.equal(proxies["x"].cpu(), given_x)
    assert torch.equal(_held(context, buf, layout), given_x)


def test_the_caller_changing_what_cpu_gave_it_changes_nothing_on_the_device(context, tmp_path):
    fn = _compile(context, tmp_path)
    x = torch.randn(32, 64)
    out = fn({"x": x})["y"]
    layout = out.spec.layout
    got = out.cpu()
    assert _is_write_back(context, out.buffer, layout)
    kept = _kept(context, out.buffer, layout)
    assert got.const_data_ptr() == kept.const_data_ptr()  # a lazy clone, not a copy
    got.mul_(0)
    got.numpy()[0, 0] = 5.0
    # The device's value: a second .cpu(), a function reading the proxy (relocated and
    # converted), and a peek all see it.
    assert torch.equal(out.cpu(), x * 2)
    plus = context.compile(lambda d: {"z": d["y"] + 1}, {"y": torch.zeros(32, 64)},
                           storage.path(tmp_path / "plus"))
    assert torch.equal(plus({"y": out})["z"].cpu(), x * 2 + 1)  # through a Convert
    bound = context.compile(lambda d: {"z": d["y"] - 1}, {"y": torch.zeros(32, 64)},
                            storage.path(tmp_path / "bound"),
                            io_spec_constraints={"y": out.spec})
    assert torch.equal(bound({"y": out})["z"].cpu(), x * 2 - 1)  # relocated: no Convert
    assert torch.equal(_held(context, out.buffer, layout), x * 2)
    assert torch.equal(got[0, 0], torch.tensor(5.0)) and torch.equal(got[0, 1], torch.tensor(0.0))


def test_the_device_overwriting_or_freeing_its_buffers_leaves_the_caller_s_tensors(
        context, tmp_path):
    fn = _compile(context, tmp_path)
    x = torch.randn(32, 64)
    given_x = x.clone()
    out = fn({"x": x})["y"]
    got = out.cpu()
    given_got = got.clone()
    device = context.device
    out_buf = out.buffer
    # Laid out, then overwritten in DRAM (a poke), then the buffer freed and reused by the
    # next call's output, then the input buffer overwritten by a copy (a non-contiguous
    # input), then by a kept tensor, then freed with the function.
    device.peek(out_buf)
    device.poke(out_buf, np.full((out_buf.groups, out_buf.lw_per_group), 7, np.uint64))
    del out
    gc.collect()
    fn({"x": torch.randn(32, 64)})["y"].cpu().add_(1)
    fn({"x": torch.randn(64, 32).t()})
    fn({"x": torch.randn(32, 64)})
    fn.unload()
    device.dram_snapshot()
    assert torch.equal(x, given_x)
    assert torch.equal(got, given_got)
    assert torch.equal(given_got, given_x * 2)
    assert device.dram.decoded.dirty == 0  # everything was laid out or overwritten


def _offset_view():
    return torch.randn(33, 64)[1:]


def _numpy_backed():
    return torch.from_numpy(np.random.default_rng(0).standard_normal((32, 64), np.float32))


def _inference():
    with torch.inference_mode():
        return torch.randn(32, 64)


# name -> (make the input, whether the device shares its memory)
INPUTS = {
    "non-contiguous": (lambda: torch.randn(64, 32).t(), False),
    "view at an offset": (_offset_view, False),
    "numpy-backed": (_numpy_backed, False),
    "inference tensor": (_inference, False),
    "requires_grad": (lambda: torch.randn(32, 64, requires_grad=True), True),
    "view of all its memory": (lambda: torch.randn(2048).view(32, 64), True),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_inputs_the_device_cannot_share_are_copied_and_any_input_keeps_its_bytes(
        context, tmp_path, name):
    make, shared = INPUTS[name]
    fn = _compile(context, tmp_path)
    x = make()
    given_x = x.detach().clone()
    out = fn({"x": x})["y"]
    buf, layout = fn.bindings["x"], fn.input_specs["x"].layout
    assert _is_write_back(context, buf, layout) is shared
    assert torch.equal(out.cpu(), given_x * 2)
    assert not out.cpu().requires_grad
    if x.is_inference():
        with torch.inference_mode():
            x.add_(1)
    else:
        with torch.no_grad():
            x.add_(1)
    assert torch.equal(_held(context, buf, layout), given_x)
    assert torch.equal(fn({"x": x})["y"].cpu(), (given_x + 1) * 2)


def test_narrowed_inputs_take_the_lane_conversion(context, tmp_path):
    fn = context.compile(lambda d: {"y": d["x"] + 1}, {"x": torch.zeros(8, 64, dtype=torch.int64)},
                         storage.path(tmp_path / "i"))
    x = torch.arange(512, dtype=torch.int64).reshape(8, 64)
    out = fn({"x": x})["y"]
    assert not _is_write_back(context, fn.bindings["x"], fn.input_specs["x"].layout)
    x.add_(5)
    assert torch.equal(out.cpu(), torch.arange(512).reshape(8, 64) + 1)


# -- a kept host tensor against an eager model, over random command sequences ---------------


def _pair_step(devices, bufs, a, b, op, seed, live):
    """One step on both devices (kept, eager); returns what each gave (the kept device's
    first, in the same order as the eager one's), to compare."""
    kept, eager = devices
    if op == "upload":  # the same tensor to both: the kept device shares it
        gen = torch.Generator().manual_seed(seed)
        tensor = torch.randn(a.shape, generator=gen).to(getattr(torch, a.dtype))
        live["source"] = tensor
        return [d.execute(HostWrite(bufs["x"], to_device(tensor, a), tensor, a)).to_dict()
                for d in devices]
    if op == "mutate_source" and "source" in live:
        live["source"].fill_(0)
        live["source"].data_ptr()  # asks for write access too
        return None
    if op == "launch":
        return [d.execute(Launch("p", {"x": bufs["x"]}, {"y": bufs["y"]})).to_dict()
                for d in devices]
    if op == "read":  # the tensor handed out, changed by the caller afterwards
        got = [d.execute(HostRead(bufs["y"], b)).tensor for d in devices]
        same = [t.clone() for t in got]
        for t in got:
            t.fill_(1)
        return same
    if op == "peek":
        return [d.peek(bufs[n]) for d in devices for n in ("x", "y")]
    if op == "overwrite":  # a plain write of x's whole range
        image = np.full((bufs["x"].groups, bufs["x"].lw_per_group), seed, np.uint64)
        for d in devices:
            d.poke(bufs["x"], image)
        return None
    return None


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(DTYPES)), st.lists(st.integers(1, 24), min_size=1, max_size=3),
       st.randoms(use_true_random=False),
       st.lists(st.tuples(st.sampled_from(("upload", "mutate_source", "launch", "read", "peek",
                                           "overwrite")), st.integers(0, 1 << 20)),
                min_size=1, max_size=12))
def test_kept_host_tensors_match_an_eager_model(dtype, shape, rng, steps):
    a = host_layout(tuple(shape), dtype)
    b = random_layout(rng, tuple(shape), dtype)
    devices = (FunctionalDevice(MNCORE2, "mncore2:auto"), FunctionalDevice(MNCORE2, "eager"))
    devices[1].dram.decoded = DecodedCache(0)  # nothing kept: every write laid out at once
    for d in devices:
        d.load_program(_program(a, b))
    bufs = {"x": devices[0].allocate(a), "y": devices[0].allocate(b)}
    for d in devices[1:]:
        assert [d.allocate(a), d.allocate(b)] == [bufs["x"], bufs["y"]]
    live: dict = {}
    for op, seed in [("upload", 1), ("launch", 0), *steps]:
        got = _pair_step(devices, bufs, a, b, op, seed, live)
        if got is not None:
            half = len(got) // 2
            for one, other in zip(got[:half], got[half:], strict=True):
                assert _same(one, other), op
    snaps = [d.dram_snapshot() for d in devices]
    assert [sorted(g) for g in snaps[0]] == [sorted(g) for g in snaps[1]]
    for g0, g1 in zip(*snaps, strict=True):
        assert all(np.array_equal(g0[p], g1[p]) for p in g0)


def _program(a, b):
    from mlsdk.device.base import LoadedProgram

    return LoadedProgram(name="p", graph=None, layouts={"x": a}, output_layouts={"y": b},
                         inputs=("x",), outputs=("y",), constants=(),
                         run=lambda v: {"y": v["x"].flip(0)})


def _same(one, other) -> bool:
    if isinstance(one, torch.Tensor):
        return one.dtype == other.dtype and torch.equal(one, other)
    if isinstance(one, np.ndarray):
        return np.array_equal(one, other)
    return one == other


# -- a freed buffer's write-back value, forgotten before the Launch that overwrites it --------


class _Recycling:
    """A device whose every Launch output forgets a freed buffer's write-back value over its
    buffer before the program runs (``recycle_bytes`` 0), with ``x`` uploaded and a program
    ``p``: ``y = x * 2`` (or what ``run`` computes) from a host layout into native tiles."""

    def __init__(self, run=None, shape=(64, 64), dtype="float32"):
        from mncore_hdl.layout import native_layout

        self.device = FunctionalDevice(MNCORE2, "mncore2:auto")
        self.device.recycle_bytes = 0
        self.a, self.b = host_layout(shape, dtype), native_layout(shape, dtype)
        self.seen: list[bool] = []
        self.old = None  # a weak reference to the value the next Launch may forget

        def record(values):
            self.seen.append(self.old is not None and self.old() is None)
            return (run or (lambda v: {"y": v["x"] * 2}))(values)
        self.device.load_program(_program_of(self.a, self.b, record))
        self.x = self.device.allocate(self.a)
        self.value = torch.arange(float(np.prod(shape))).reshape(shape).to(getattr(torch, dtype))
        self.device.execute(HostWrite(self.x, to_device(self.value, self.a)))

    def launch(self, y, reads=None):
        self.device.execute(Launch("p", {"x": reads or self.x}, {"y": y}))

    def kept(self, y):
        import weakref

        self.old = weakref.ref(self.device.dram.decoded.entries[(y.id, layout_key(self.b))]
                               .value)


def _program_of(a, b, run, name="p"):
    from mlsdk.device.base import LoadedProgram

    return LoadedProgram(name=name, graph=None, layouts={"x": a}, output_layouts={"y": b},
                         inputs=("x",), outputs=("y",), constants=(), run=run)


def test_a_freed_output_s_value_is_forgotten_before_the_launch_that_overwrites_it():
    r = _Recycling()
    y = r.device.allocate(r.b)
    r.launch(y)
    r.kept(y)
    r.device.free(y)
    y2 = r.device.allocate(r.b)
    assert (y2.group, y2.address) == (y.group, y.address)  # the freed range, taken again
    r.launch(y2)
    assert r.seen == [False, True]  # gone before the program ran: its memory free for it
    assert r.device.dram.decoded.dirty == 1  # the new value only
    assert torch.equal(from_device(r.device.peek(y2), r.b), r.value * 2)


def test_a_live_buffer_s_value_and_a_read_one_are_kept_until_stored():
    def fails(values):
        raise KeyboardInterrupt

    r = _Recycling()
    y = r.device.allocate(r.b)
    r.launch(y)
    r.kept(y)
    r.launch(y)  # the same live buffer stored again: its value is its own until then
    assert r.seen == [False, False]
    raising = _Recycling(run=fails)
    y = raising.device.allocate(raising.b)
    raising.device.execute(HostWrite(y, to_device(raising.value + 5, raising.b)))
    raising.device.load_program(_program_of(raising.b, raising.b, lambda v: {"y": v["x"] + 1},
                                            "q"))
    raising.device.execute(Launch("q", {"x": y}, {"y": y}))  # read and stored: a state update
    with pytest.raises(KeyboardInterrupt):
        raising.launch(y)  # the live buffer keeps its value when the run raises
    assert torch.equal(from_device(raising.device.peek(y), raising.b), raising.value + 6)


def test_a_range_checked_output_keeps_a_freed_value_until_stored():
    r = _Recycling(shape=(8, 64), dtype="int64")
    y = r.device.allocate(r.b)
    r.launch(y)
    r.kept(y)
    r.device.free(y)
    y2 = r.device.allocate(r.b)
    r.launch(y2)
    assert r.seen == [False, False]  # an int64 output may be refused: nothing forgotten
    assert torch.equal(from_device(r.device.peek(y2), r.b), r.value * 2)
