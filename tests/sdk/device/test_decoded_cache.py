"""The functional model's decoded-value cache: a buffer read by Launch is decoded once, and
every write to it (host write, conversion, another program's output, poke) is seen next time."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.device.base import LoadedProgram
from mlsdk.device.commands import Convert, HostWrite, Launch
from mlsdk.device.decoded import DecodedCache
from mlsdk.device.functional import FunctionalDevice
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import conversion, from_device, host_layout, native_layout, to_device

SHAPE = (64, 64)
NATIVE = native_layout(SHAPE)
HOST = host_layout(SHAPE)


def _program(name: str, run, inputs: tuple[str, ...], outputs: dict[str, object]):
    return LoadedProgram(name=name, graph=None, layouts={n: NATIVE for n in inputs},
                         output_layouts=dict(outputs), inputs=inputs,
                         outputs=tuple(outputs), constants=(), run=run)


def _values(seed: int) -> torch.Tensor:
    return torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed))


def _session(device: FunctionalDevice) -> tuple[list[torch.Tensor], list, dict]:
    """Write ``w`` in the native layout, then change it every way a device can, reading it
    with a Launch after each change; return what each Launch read, every result and the
    buffers read in the native layout."""
    device.load_program(_program("read", lambda v: {"y": v["w"] * 1}, ("w",), {"y": HOST}))
    device.load_program(_program("write", lambda v: {"w": v["a"] + 1}, ("a",), {"w": NATIVE}))
    w, y = device.allocate(NATIVE), device.allocate(HOST)
    a, staged = device.allocate(NATIVE), device.allocate(HOST)
    seen, results = [], []

    def run(command) -> None:
        results.append(device.execute(command))

    def read() -> None:
        run(Launch("read", {"w": w}, {"y": y}))
        seen.append(from_device(device.peek(y), HOST))

    run(HostWrite(w, to_device(_values(0), NATIVE)))
    read()
    read()  # unchanged: the second Launch reads the kept tensor
    run(HostWrite(w, to_device(_values(1), NATIVE)))
    read()
    run(HostWrite(staged, to_device(_values(2), HOST)))
    run(Convert(staged, str(HOST), w, str(NATIVE), conversion(HOST, NATIVE)))
    read()
    run(HostWrite(a, to_device(_values(3), NATIVE)))
    run(Launch("write", {"a": a}, {"w": w}))  # another program's output lands in w
    read()
    device.poke(w, to_device(_values(4), NATIVE).copy())
    read()
    return seen, results, {"w": w, "a": a, "y": y}


def test_every_write_to_a_cached_buffer_is_seen_by_the_next_launch():
    device = FunctionalDevice(MNCORE2, "mncore2:auto")
    seen, _, _ = _session(device)
    expected = [_values(0), _values(0), _values(1), _values(2), _values(3) + 1, _values(4)]
    for i, (got, want) in enumerate(zip(seen, expected, strict=True)):
        assert torch.equal(got, want), f"Launch {i} read a stale value"


def test_results_dram_and_cycles_are_those_of_an_uncached_device():
    cached = FunctionalDevice(MNCORE2, "mncore2:auto")
    plain = FunctionalDevice(MNCORE2, "mncore2:auto")
    plain.dram.decoded = DecodedCache(0)  # keeps nothing: every Launch decodes
    seen_c, results_c, _ = _session(cached)
    seen_p, results_p, _ = _session(plain)
    assert len(plain.dram.decoded) == 0 and len(cached.dram.decoded) > 0
    assert all(torch.equal(c, p) for c, p in zip(seen_c, seen_p, strict=True))
    assert [r.to_dict() for r in results_c] == [r.to_dict() for r in results_p]
    snap_c, snap_p = cached.dram_snapshot(), plain.dram_snapshot()
    assert [sorted(g) for g in snap_c] == [sorted(g) for g in snap_p]
    for group_c, group_p in zip(snap_c, snap_p, strict=True):
        assert all(np.array_equal(group_c[page], group_p[page]) for page in group_c)


def test_a_freed_buffer_takes_its_decoded_tensor_with_it():
    device = FunctionalDevice(MNCORE2, "mncore2:auto")
    _, _, buffers = _session(device)
    decoded = device.dram.decoded
    # w and a as decoded by Launch, and y as the last Launch output (laid out by peek: clean)
    assert len(decoded) == 3 and decoded.nbytes == 3 * 64 * 64 * 4
    device.free(buffers["w"])
    assert len(decoded) == 2 and decoded.nbytes == 2 * 64 * 64 * 4
    device.unload_program("write", (buffers["a"],))
    assert len(decoded) == 1 and decoded.nbytes == 64 * 64 * 4
    device.free(buffers["y"])
    assert len(decoded) == 0 and decoded.nbytes == 0


def test_the_cache_holds_at_most_its_limit_least_recently_used_first_out():
    cache = DecodedCache(3 * 4096)
    tensors = [torch.full((1024,), float(i)) for i in range(5)]  # 4 KiB each
    for i, t in enumerate(tensors[:3]):
        cache.put(i, t, (0, 1, i * 512, 512))
    assert cache.get(0) is tensors[0]  # 0 is now the most recent: 1 goes first
    cache.put(3, tensors[3], (0, 1, 3 * 512, 512))
    assert cache.get(1) is None and cache.get(0) is tensors[0]
    assert cache.nbytes == 3 * 4096 and len(cache) == 3
    cache.put(4, torch.zeros(4096), (0, 1, 0, 2048))  # larger than the limit: not kept
    assert cache.get(4) is None and cache.nbytes == 3 * 4096


def test_invalidation_drops_exactly_the_overlapping_ranges():
    cache = DecodedCache()
    cache.put("g0", torch.zeros(4), (0, 1, 0x100, 0x10))
    cache.put("g1-2", torch.zeros(4), (1, 2, 0x100, 0x10))
    cache.invalidate(0, 1, 0x110, 0x10)  # right after g0's range: no overlap
    cache.invalidate(3, 1, 0x100, 0x10)  # another Group
    assert len(cache) == 2
    cache.invalidate(2, 1, 0x10f, 1)  # last LW of g1-2 in its second Group
    assert cache.get("g1-2") is None and cache.get("g0") is not None


def test_a_tensor_changed_in_place_by_its_reader_is_not_returned():
    cache = DecodedCache()
    value = torch.zeros(4)
    cache.put("k", value, (0, 1, 0, 2))
    value.add_(1)
    assert cache.get("k") is None and cache.nbytes == 0


def test_the_limit_must_be_a_non_negative_number_of_bytes():
    with pytest.raises(ValueError, match="non-negative number of bytes, not -1"):
        DecodedCache(-1)


def test_registered_parameters_are_decoded_once_and_see_a_poke(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    x = torch.randn(8, 64)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        f = context.compile(lambda d: {"y": model(d["x"])}, {"x": x}, storage.path(tmp_path))
        first = f({"x": x})["y"].cpu()
        decoded = context.device.dram.decoded
        kept = len(decoded)
        assert torch.equal(f({"x": x})["y"].cpu(), first) and len(decoded) == kept
        proxy = context.get_registered_value_proxy(model.weight)
        zero = np.zeros_like(context.device.peek(proxy.buffer))
        context.device.poke(proxy.buffer, zero)
        assert torch.allclose(f({"x": x})["y"].cpu(), model.bias.detach().expand(8, 64))


def test_invalidate_forgets_exactly_the_overlapping_entries():
    """The overlap index against the overlap test written out, over random spans (nested,
    equal, adjacent, over several Groups, empty, and long enough for every index level) and
    random writes."""
    rng = np.random.default_rng(7)
    cache = DecodedCache(limit_bytes=1 << 30)
    spans: dict[int, tuple[int, int, int, int]] = {}

    def overlaps(span, group, groups, address, count):  # an empty range overlaps nothing
        return (span[3] > 0 and span[0] < group + groups and group < span[0] + span[1]
                and span[2] < address + count and address < span[2] + span[3])

    for step in range(3000):
        if rng.random() < 0.6 or not spans:
            group = int(rng.integers(0, 4))
            span = (group, int(rng.integers(1, 5 - group)), int(rng.integers(0, 640)) * 8,
                    int(rng.choice([0, 1, 8, 16, 100, 300, 5000, 70_000, 1_500_000])))
            key = int(rng.integers(0, 40))
            cache.put(key, torch.zeros(1), span)
            spans[key] = span
        else:
            group = int(rng.integers(0, 4))
            write = (group, int(rng.integers(1, 5 - group)), int(rng.integers(0, 6000)),
                     int(rng.choice([1, 50, 3000, 9000, 80_000, 2_000_000])))
            cache.invalidate(*write)
            spans = {k: s for k, s in spans.items() if not overlaps(s, *write)}
        held = {k for k in range(40) if cache.get(k) is not None}
        assert held == set(spans), f"step {step}"
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    cache.put("again", torch.zeros(1), (0, 1, 0, 1))
    cache.invalidate(0, 1, 0, 1)
    assert cache.get("again") is None


def test_flush_range_lays_out_exactly_the_dirty_entries_it_overlaps():
    """The dirty entries' own index against the overlap test written out: a random mix of
    clean and dirty entries, random observations; each flushes the dirty entries it overlaps,
    once, and they stay (clean)."""
    rng = np.random.default_rng(11)
    flushed: list[object] = []
    cache = DecodedCache(limit_bytes=1 << 30, flush=lambda entry: flushed.append(entry.owner))
    dirty: dict[int, tuple[int, int, int, int]] = {}

    def overlaps(span, group, groups, address, count):
        return (span[3] > 0 and span[0] < group + groups and group < span[0] + span[1]
                and span[2] < address + count and address < span[2] + span[3])

    for step in range(2000):
        key = int(rng.integers(0, 30))
        if rng.random() < 0.5:
            group = int(rng.integers(0, 4))
            span = (group, int(rng.integers(1, 5 - group)), int(rng.integers(0, 640)) * 8,
                    int(rng.choice([1, 16, 300, 5000, 70_000])))
            is_dirty = bool(rng.random() < 0.6)
            cache.put(key, torch.zeros(1), span, owner=key, dirty=is_dirty)
            dirty.pop(key, None)
            if is_dirty:
                dirty[key] = span
            continue
        group = int(rng.integers(0, 4))
        seen = (group, int(rng.integers(1, 5 - group)), int(rng.integers(0, 6000)),
                int(rng.choice([1, 50, 3000, 80_000])))
        flushed.clear()
        cache.flush_range(*seen)
        want = {k for k, s in dirty.items() if overlaps(s, *seen)}
        assert sorted(flushed) == sorted(want), f"step {step}"
        dirty = {k: s for k, s in dirty.items() if k not in want}
        assert cache.dirty == len(dirty) and all(cache.is_dirty(k) for k in dirty)


def test_put_dirty_is_invalidate_then_put_also_when_it_replaces_in_place():
    """put_dirty against its definition written out (drop what overlaps the range, laying
    out the dirty values that stick out of it, then keep the value dirty), over random
    clean puts, dirty puts (often the same key over the same range: the in-place path)
    and observations."""
    rng = np.random.default_rng(5)
    flushed: list[object] = []
    cache = DecodedCache(limit_bytes=1 << 30, flush=lambda entry: flushed.append(entry.owner))
    held: dict[int, tuple[tuple[int, int, int, int], bool]] = {}
    spans = [(0, 1, 0, 300), (0, 1, 200, 300), (1, 2, 0, 5000), (0, 4, 4096, 70_000),
             (2, 1, 1000, 16)]

    def overlaps(span, group, groups, address, count):
        return (span[3] > 0 and span[0] < group + groups and group < span[0] + span[1]
                and span[2] < address + count and address < span[2] + span[3])

    def inside(span, group, groups, address, count):
        return (group <= span[0] and span[0] + span[1] <= group + groups
                and address <= span[2] and span[2] + span[3] <= address + count)

    for step in range(3000):
        key = int(rng.integers(0, 8))
        span = spans[(key + int(rng.integers(0, 2))) % len(spans)]
        action = rng.random()
        flushed.clear()
        if action < 0.5:
            # ... and the key's own dirty value elsewhere: its old range keeps its bytes
            want = sorted(k for k, (s, d) in held.items()
                          if d and (overlaps(s, *span) or k == key) and not inside(s, *span))
            assert cache.put_dirty(key, torch.zeros(int(rng.integers(1, 3))), span, key, None)
            held = {k: v for k, v in held.items() if not overlaps(v[0], *span)}
            held[key] = (span, True)
        elif action < 0.7:
            cache.put(key, torch.zeros(1), span, owner=key)
            want = sorted({key} & {k for k, (_, d) in held.items() if d})
            held[key] = (span, False)
        else:
            want = sorted(k for k, (s, d) in held.items() if d and overlaps(s, *span))
            cache.flush_range(*span)
            held.update({k: (held[k][0], False) for k in want})
        assert sorted(flushed) == want, f"step {step}"
        assert {k for k in range(8) if cache.get(k) is not None} == set(held), f"step {step}"
        assert {k for k in held if cache.is_dirty(k)} == {k for k, v in held.items() if v[1]}
        assert cache.dirty == sum(d for _, d in held.values())


def test_a_write_under_a_dram_view_is_seen_through_kept_constant_values(tmp_path):
    """A registered parameter read as a view of DRAM (a row-major layout) feeds nodes that read
    only constants, whose values the interpreter keeps between calls: a poke, and an update
    from the host, under the view bump its version, so the next call computes them again."""
    torch.manual_seed(0)

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * (self.scale * 2 + 1)

    model, x = Scaled(), torch.randn(4, 16)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        f = context.compile(lambda d: {"y": model(d["x"])}, {"x": x}, storage.path(tmp_path))
        assert torch.equal(f({"x": x})["y"].cpu(), f({"x": x})["y"].cpu())
        proxy = context.get_registered_value_proxy(model.scale)
        assert any(key[0] == proxy.buffer.id for key in context.device._views), "not a view"
        new = torch.arange(16.0)
        context.device.poke(proxy.buffer, to_device(new, proxy.spec.layout).copy())
        assert torch.equal(f({"x": x})["y"].cpu(), x * (new * 2 + 1))
        with torch.no_grad():
            model.scale.copy_(-new)
        context.registry.update_from_host(model.scale)
        assert torch.equal(f({"x": x})["y"].cpu(), x * (-new * 2 + 1))
