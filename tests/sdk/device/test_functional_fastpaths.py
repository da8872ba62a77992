"""The functional model's bookkeeping shortcuts against what they replace: DRAM views kept for
row-major Launch inputs, converter bytes counted once per descriptor, and layout cache
keys."""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest
import torch
from mlsdk.device.base import LoadedProgram
from mlsdk.device.commands import Convert, HostRead, HostWrite, Launch
from mlsdk.device.functional import FunctionalDevice, LayoutNumbers, layout_key
from mncore_hdl.arch import MNCORE2
from mncore_hdl.layout import (
    ConversionDescriptor,
    conversion,
    from_device,
    host_layout,
    native_layout,
    to_device,
)

SHAPE = (16, 64)
HOST, NATIVE = host_layout(SHAPE), native_layout(SHAPE)


def _device_with_copy_program() -> tuple[FunctionalDevice, object, object]:
    device = FunctionalDevice(MNCORE2, "mncore2:auto")
    device.load_program(LoadedProgram("p", None, {"x": HOST}, {"y": NATIVE}, ("x",), ("y",), (),
                                      run=lambda v: {"y": v["x"] + 1}))
    return device, device.allocate(HOST), device.allocate(NATIVE)


def test_a_row_major_input_kept_as_a_dram_view_sees_every_later_write():
    device, x, y = _device_with_copy_program()
    seeds = iter(range(100))

    def launch() -> torch.Tensor:
        device.execute(Launch("p", {"x": x}, {"y": y}))
        return device.execute(HostRead(y, NATIVE)).tensor

    values = torch.randn(SHAPE, generator=torch.Generator().manual_seed(next(seeds)))
    device.execute(HostWrite(x, to_device(values, HOST)))
    assert torch.equal(launch(), values + 1)
    assert device.kept_views == 1  # the input is a view of DRAM: kept, not copied
    values = torch.randn(SHAPE, generator=torch.Generator().manual_seed(next(seeds)))
    device.execute(HostWrite(x, to_device(values, HOST)))
    assert torch.equal(launch(), values + 1)
    values[3] = 7.0  # a partial write through the Group's DRAM, outside any command
    row = to_device(values, HOST)[0]
    per_row = HOST.lw_per_group // SHAPE[0]
    device.drams[x.group].write(x.address + 3 * per_row, row[3 * per_row:4 * per_row])
    assert torch.equal(launch(), values + 1)
    device.free(x)
    assert device.kept_views == 0


def test_a_convert_carries_its_descriptor_typed():
    device = FunctionalDevice(MNCORE2, "mncore2:auto")
    fresh = FunctionalDevice(MNCORE2, "mncore2:auto")
    src, dst = device.allocate(HOST), device.allocate(NATIVE)
    assert fresh.allocate(HOST) == src and fresh.allocate(NATIVE) == dst
    values = torch.randn(SHAPE)
    device.poke(src, to_device(values, HOST))
    fresh.poke(src, to_device(values, HOST))
    descriptor = conversion(HOST, NATIVE)
    command = Convert(src, str(HOST), dst, str(NATIVE), descriptor, "float32")
    assert command.descriptor is descriptor
    first = device.execute(command)
    assert device.execute(command).to_dict() == first.to_dict()  # the memo's answer
    assert first.to_dict() == fresh.execute(copy.deepcopy(command)).to_dict()
    assert torch.equal(from_device(device.peek(dst), NATIVE), values)
    # An equal descriptor (e.g. rebuilt from JSON) is the same conversion.
    again = Convert(src, str(HOST), dst, str(NATIVE),
                    ConversionDescriptor.from_dict(descriptor.to_dict()), "float32")
    assert device.execute(again).to_dict() == first.to_dict()
    with pytest.raises(TypeError, match="descriptor must be a ConversionDescriptor .*not dict"):
        Convert(src, str(HOST), dst, str(NATIVE), descriptor.to_dict(), "float32")


def test_a_layout_key_from_another_process_is_not_trusted():
    # The key is kept on the layout; a layout unpickled (the compile cache) or copied carries
    # the number another process gave some layout, which must not alias a different layout.
    foreign = pickle.loads(pickle.dumps(HOST))
    object.__setattr__(foreign, "_cache_key", (layout_key(NATIVE), object()))
    assert layout_key(foreign) == layout_key(HOST) != layout_key(NATIVE)


def test_layout_numbers_stay_bounded_and_never_alias():
    numbers = LayoutNumbers(limit=2)
    layouts = [copy.deepcopy(layout) for layout in (HOST, NATIVE, HOST, NATIVE)]
    keys = [numbers.key(layout) for layout in layouts]
    assert len(numbers) <= 2
    # HOST and NATIVE never share a number, whenever each was numbered.
    assert not {keys[0], keys[2]} & {keys[1], keys[3]}


def test_equal_layouts_share_a_cache_key_and_hit_the_same_entry():
    twin = copy.deepcopy(NATIVE)
    twin.__dict__.pop("_cache_key", None)
    assert twin is not NATIVE and layout_key(twin) == layout_key(NATIVE)
    assert hash(layout_key(twin)) == hash(layout_key(NATIVE))
    assert layout_key(HOST) != layout_key(NATIVE)
    device, x, y = _device_with_copy_program()
    values = torch.randn(SHAPE)
    device.execute(HostWrite(x, to_device(values, HOST)))
    device.execute(Launch("p", {"x": x}, {"y": y}))
    kept = device.dram.decoded.get((y.id, layout_key(twin)))
    assert kept is not None and torch.equal(kept, values + 1)
    assert np.array_equal(device.peek(y), to_device(values + 1, NATIVE))


def test_a_read_the_program_never_uses_costs_its_cycles_and_is_not_decoded():
    label = native_layout((16, 64), "int64")

    def run(values: dict) -> dict:
        assert "label" not in values  # unread: not decoded, not passed
        return {"y": values["x"] + 1}

    costs = []
    for unread in (frozenset({"label"}), frozenset()):
        device = FunctionalDevice(MNCORE2, "mncore2:auto")
        device.load_program(LoadedProgram(
            "p", None, {"x": HOST, "label": label}, {"y": NATIVE}, ("x", "label"), ("y",), (),
            run=run if unread else lambda v: {"y": v["x"] + 1}, unread=unread))
        x, lab, y = device.allocate(HOST), device.allocate(label), device.allocate(NATIVE)
        values = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
        device.execute(HostWrite(x, to_device(values, HOST)))
        device.execute(HostWrite(lab, to_device(torch.arange(16 * 64).view(16, 64), label)))
        launched = device.execute(Launch("p", {"x": x, "label": lab}, {"y": y}))
        assert torch.equal(device.execute(HostRead(y, NATIVE)).tensor, values + 1)
        costs.append((launched.cycles, dict(launched.bytes)))
        decoded = {key[0] for key in device.dram.decoded.entries}
        assert (lab.id in decoded) == (not unread)
    assert costs[0] == costs[1]


def test_a_renamed_span_is_found_as_removed_and_added_would_be():
    from mlsdk.device.spans import SpanIndex

    rng = random.Random(4)
    spans = {k: (rng.randrange(4), rng.randrange(1, 3), rng.randrange(0, 1 << 20),
                 rng.choice([0, 1, 300, 5000, 1 << 18])) for k in range(40)}
    renamed, rebuilt = SpanIndex(), SpanIndex()
    for key, span in spans.items():
        renamed.add(key, span)
        rebuilt.add(key, span)
    for key in range(0, 40, 3):
        renamed.rename(key, ("new", key))
        rebuilt.remove(key)
        rebuilt.add(("new", key), spans[key])
    with pytest.raises(KeyError):
        renamed.rename(1, ("new", 0))
    for _ in range(200):
        probe = (rng.randrange(4), rng.randrange(1, 4), rng.randrange(0, 1 << 20),
                 rng.randrange(1, 1 << 19))
        assert sorted(map(str, renamed.overlapping(*probe))) == sorted(
            map(str, rebuilt.overlapping(*probe)))


def test_the_span_index_finds_what_a_test_of_every_range_finds():
    from mlsdk.device.spans import SpanIndex

    rng = random.Random(9)
    index, held = SpanIndex(), {}
    for step in range(3000):
        key = rng.randrange(12)
        if key in held and rng.random() < 0.4:
            index.remove(key)
            del held[key]
        else:
            span = (rng.randrange(4), rng.randrange(1, 3), rng.randrange(0, 1 << 16),
                    rng.choice([0, 1, 17, 300, 5000, 1 << 14]))
            index.add(key, span)
            held[key] = span
        probe = (rng.randrange(4), rng.randrange(1, 4), rng.randrange(0, 1 << 16),
                 rng.randrange(1, 1 << 15))
        group, groups, address, count = probe
        want = {k for k, s in held.items()
                if s[3] > 0 and s[0] < group + groups and group < s[0] + s[1]
                and s[2] < address + count and address < s[2] + s[3]}
        assert set(index.overlapping(*probe)) == want, f"step {step}"
        # The quick test by per-Group bounds never rules out a range that overlaps.
        assert index.may_overlap(*probe) or not want, f"step {step}"
