"""Threads, long sessions and memory that comes back: a Context stays right and bounded."""

from __future__ import annotations

import gc
import re
import sys
import threading
import tracemalloc

import pytest
import torch
from mlsdk import Context, DeviceMemoryError, MNDevice, storage
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import Layout


def affine(inputs):
    return {"y": inputs["x"] * 2 + inputs["b"]}


def plus_one(inputs):
    return {"z": inputs["y"] + 1}


@pytest.fixture
def tiny_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _run_threads(work, count: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# -- threads --------------------------------------------------------------------------------


def test_threads_calling_one_function_each_get_their_own_result(context, tmp_path,
                                                                  tiny_switch_interval):
    shape = (16, 32)
    f = context.compile(affine, {"x": torch.zeros(shape), "b": torch.zeros(shape)},
                        storage.path(tmp_path / "f"))
    g = context.compile(plus_one, {"y": torch.zeros(shape)}, storage.path(tmp_path / "g"))
    wrong: list[str] = []

    def work(index: int) -> None:
        rng = torch.Generator().manual_seed(index)
        for i in range(60):
            x = torch.randn(shape, generator=rng)
            b = torch.full(shape, float(index))
            y = f({"x": x, "b": b})["y"]
            if i % 3 == 0:  # a hand-off on the device, then the read
                got = g({"y": y})["z"].cpu()
                want = x * 2 + b + 1
            else:
                got = y.cpu()
                want = x * 2 + b
            if not torch.equal(got, want):
                wrong.append(f"thread {index} call {i}")

    errors = _run_threads(work, 4)
    assert not errors, errors
    assert not wrong, f"{len(wrong)} call(s) got another thread's result: {wrong[:5]}"
    assert len(context.report().calls("affine")) == 240


def test_allocator_from_several_threads_never_overlaps(context, tiny_switch_interval):
    device = context.device
    layouts = [Layout.parse("(64,8)/((64:8), (8:1))"), Layout.parse("(4,32)/((4_G:1), (32:1))")]
    overlaps: list[str] = []

    def work(index: int) -> None:
        held = []
        for i in range(400):
            buf = device.allocate(layouts[(index + i) % 2])
            held.append(buf)
            overlaps.extend(f"{buf} and {other}" for other in device.allocator.live.values()
                            if other.id != buf.id and _overlap(buf, other))
            if len(held) > 6:
                device.free(held.pop(i % len(held)))
        for buf in held:
            device.free(buf)

    errors = _run_threads(work, 4)
    assert not errors, errors
    assert not overlaps, overlaps[:5]
    assert device.allocator.live == {}


def _overlap(a, b) -> bool:
    groups = set(range(a.group, a.group + a.groups)) & set(range(b.group, b.group + b.groups))
    return bool(groups) and a.address < b.address + b.lw_per_group and \
        b.address < a.address + a.lw_per_group


# -- functions give their memory back -------------------------------------------------------


@pytest.fixture
def small_context():
    # 1 MiB of DRAM per Group: a function with a 256 KiB constant fills it in a few loads.
    ctx = Context(MNDevice("mncore2:auto",
                           config=MNCORE2.replace(dram_bytes_per_group=1 << 20,
                                                  sim_window_lw=4096)))
    yield ctx
    ctx.close()


def _weighted(tmp_path, ctx):
    weight = torch.randn(256, 256)  # 256 KiB of float32

    def weighted(inputs):
        return {"y": inputs["x"] @ weight}

    path = storage.path(tmp_path / "w")
    ctx.compile(weighted, {"x": torch.randn(8, 256)}, path).unload()
    return path, weight


def test_loading_one_directory_in_a_loop_does_not_exhaust_dram(small_context, tmp_path):
    ctx = small_context
    path, weight = _weighted(tmp_path, ctx)
    x = torch.randn(8, 256)
    for _ in range(40):  # 40 x 256 KiB: ten times the DRAM
        f = ctx.load_codegen_dir(path)
        torch.testing.assert_close(f({"x": x})["y"].cpu(), x @ weight)
    del f
    gc.collect()
    assert ctx.device.allocator.live == {}
    assert ctx.device.programs == {} and ctx.device.descriptors == {}


def test_unload_gives_back_buffers_and_descriptors(context, tmp_path):
    from mlsdk import FunctionUnloadedError

    device = context.device
    sample = {"x": torch.zeros(8, 8), "b": torch.zeros(8, 8)}
    f = context.compile(affine, sample, storage.path(tmp_path / "f"))
    out = f(sample)["y"]
    assert f.key in device.programs
    assert {k for k in device.descriptors if k[0] == f.key} == {(f.key, "x"), (f.key, "b")}
    f.unload()
    assert f.key not in device.programs
    assert not [k for k in device.descriptors if k[0] == f.key]
    assert list(device.allocator.live.values()) == [out.buffer]  # the output stays valid
    assert out.cpu().eq(0).all()
    with pytest.raises(FunctionUnloadedError, match=r"affine \(affine#1\) was unloaded"):
        f(sample)
    f.unload()  # twice: nothing


def test_collected_function_gives_back_its_memory(context, tmp_path):
    device = context.device
    f = context.compile(affine, {"x": torch.zeros(8, 8), "b": torch.zeros(8, 8)},
                        storage.path(tmp_path / "f"))
    key = f.key
    assert len(device.allocator.live) == 2
    del f
    gc.collect()
    assert device.allocator.live == {}
    assert key not in device.programs


def test_out_of_memory_names_what_holds_it(small_context, tmp_path):
    ctx = small_context
    path, _ = _weighted(tmp_path, ctx)
    keep = [ctx.load_codegen_dir(path)]
    proxies = [keep[0]({"x": torch.randn(8, 256)}) for _ in range(4)]
    with pytest.raises(DeviceMemoryError) as caught:
        for _ in range(64):
            keep.append(ctx.load_codegen_dir(path))
    message = str(caught.value)
    owners = list(ctx.device.allocator.owners().items())
    assert len(keep) > 9 and len(owners) == len(keep) + 1
    assert all(o.startswith("function weighted#") for o, _ in owners[:8])
    for owner, (n, nbytes) in owners[:8]:  # the largest holders, by name
        assert f"{owner}: {nbytes} bytes in {n} buffer(s)" in message
    # The rest are summed (the failed load's own partial buffer included at that moment).
    assert re.search(r"\d+ other owner\(s\): \d+ bytes\. Free what you no longer need", message)
    assert ("TensorProxies (outputs of weighted#2)", (4, 4 * 8 * 256 * 4)) in owners
    assert len(proxies) == 4


# -- the report keeps figures, not data -----------------------------------------------------


def test_reads_keep_no_data_in_the_report(context, tmp_path):
    f = context.compile(lambda d: {"y": d["x"] + 0}, {"x": torch.zeros(512, 512)},
                        storage.path(tmp_path / "f"))  # 1 MiB
    y = f({"x": torch.randn(512, 512)})["y"]
    y.cpu()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(100):
        y.cpu()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    records = [r for r in context.report() if r.kind == "read"]
    assert len(records) == 101
    assert all(c.data is None for r in records for c in r.commands)
    assert held < 4 << 20, f"100 reads of 1 MiB hold {held} bytes"


def test_folded_totals_equal_the_totals_of_a_full_history(tmp_path):
    # Records dropped from a bounded history are folded into its totals: every figure must
    # equal what the unbounded history of the same session adds up to.
    totals = []
    for history in (None, 3):
        with Context(MNDevice("mncore2:auto"), history=history) as ctx:
            f = ctx.compile(lambda d: {"y": d["x"] * 3}, {"x": torch.zeros(8, 8)},
                            storage.path(tmp_path / f"f{history}"))
            g = ctx.compile(lambda d: {"z": d["y"] + 1}, {"y": torch.zeros(8, 8)},
                            storage.path(tmp_path / f"g{history}"))
            for i in range(7):
                y = f({"x": torch.full((8, 8), float(i))})["y"]
                g({"y": y})["z"].cpu()
            report = ctx.report()
            totals.append(report.totals)
    full, folded = totals
    assert folded == full
    assert full["bytes"]["host"] > 0 and full["cycles"] > 0 and full["relocations"] == 7


def test_report_history_is_bounded_and_keeps_totals(tmp_path):
    with Context(MNDevice("mncore2:auto"), history=5) as ctx:
        f = ctx.compile(lambda d: {"y": d["x"] * 3}, {"x": torch.zeros(8, 8)},
                        storage.path(tmp_path / "f"))
        for _ in range(20):
            f({"x": torch.ones(8, 8)})
        report = ctx.report()
        assert len(report) == 5 and report.dropped == 16
        assert report.totals["call"] == 20 and report.totals["load"] == 1
        per_call = report.calls()[-1].bytes["host"]
        assert report.totals["bytes"]["host"] == 20 * per_call + ctx.report()[0].bytes["host"] \
            or report.totals["bytes"]["host"] >= 20 * per_call
        assert "16 older record(s)" in str(report)
        cleared = ctx.report(clear=True)
        assert cleared.totals["call"] == 20
        empty = ctx.report()
        assert len(empty) == 0 and empty.totals["records"] == 0
        f({"x": torch.ones(8, 8)})
        assert ctx.report().totals["call"] == 1
    with pytest.raises(ValueError, match="history must be a positive int or None"):
        Context(MNDevice("mncore2:auto"), history=0)
