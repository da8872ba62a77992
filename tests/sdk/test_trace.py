"""Perfetto traces: trace_scope / trace_event, read back with Perfetto's own protobuf schema."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from mlsdk.testing.examples import run_example
from mncore_hdl.paths import repo_root

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

import mlsdk  # noqa: E402
import mlsdk.trace  # noqa: E402
import mlsdk.trace_writer  # noqa: E402
from mlsdk import Context, MNDevice, storage, trace_event, trace_scope  # noqa: E402
from mlsdk.trace import DEVICE_TRACKS, annotate_current  # noqa: E402

ROOT = repo_root()
SHAPE = (32, 64)
BEGIN, END = 1, 2  # TrackEvent.TYPE_SLICE_BEGIN / TYPE_SLICE_END


@dataclass
class Slice:
    name: str
    track: int
    start: int
    end: int
    args: dict[str, Any]
    parent: Slice | None = None
    flows: list[int] = field(default_factory=list)
    terminating: list[int] = field(default_factory=list)


@dataclass
class Parsed:
    tracks: dict[int, Any]  # uuid -> TrackDescriptor
    slices: list[Slice]

    def track_named(self, name: str) -> list[int]:
        return [u for u, d in self.tracks.items() if d.name == name]

    def on(self, track_name: str) -> list[Slice]:
        uuids = set(self.track_named(track_name))
        return [s for s in self.slices if s.track in uuids]

    def named(self, name: str) -> list[Slice]:
        return [s for s in self.slices if s.name == name]

    def thread_tracks(self) -> dict[int, Any]:
        return {u: d for u, d in self.tracks.items() if d.HasField("thread")}


def _value(note: Any) -> Any:
    which = note.WhichOneof("value")
    return getattr(note, which) if which else None


def parse(path: Path) -> Parsed:
    """Read a trace file back: its track descriptors, and its slices with their nesting."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks: dict[int, Any] = {}
    events = []
    for i, packet in enumerate(trace.packet):
        if packet.HasField("track_descriptor"):
            tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        elif packet.HasField("track_event"):
            events.append((packet.timestamp, i, packet.track_event))
    stamps = [p.timestamp for p in trace.packet]
    assert stamps == sorted(stamps), "packets are written in timestamp order"
    open_: dict[int, list[Slice]] = {}
    slices = []
    for ts, _, event in events:
        assert event.track_uuid in tracks, f"event on undeclared track {event.track_uuid}"
        stack = open_.setdefault(event.track_uuid, [])
        if event.type == BEGIN:
            s = Slice(event.name, event.track_uuid, ts, -1,
                      {a.name: _value(a) for a in event.debug_annotations},
                      stack[-1] if stack else None, list(event.flow_ids),
                      list(event.terminating_flow_ids))
            stack.append(s)
            slices.append(s)
        elif event.type == END:
            stack.pop().end = ts
    assert all(not stack for stack in open_.values()), "a slice was never ended"
    return Parsed(tracks, slices)


def add(inputs):
    return {"z": inputs["x"] + inputs["y"]}


def producer(inputs):
    return {"shared": inputs["x"] * 2}


def consumer(inputs):
    return {"result": inputs["shared"] + 1}


def _pair():
    return {"x": torch.randn(SHAPE), "y": torch.randn(SHAPE)}


def test_call_commands_and_tracks(tmp_path, context, seed):
    out = tmp_path / "add.pftrace"
    inputs = _pair()
    with trace_scope(out) as scope:
        assert mlsdk.trace.active is scope.tracer is not None
        f = context.compile(add, inputs, storage.path(tmp_path / "add"))
        z = f(inputs)["z"].cpu()
    assert mlsdk.trace.active is None
    torch.testing.assert_close(z, inputs["x"] + inputs["y"])
    t = parse(out)

    # Host: one process, one thread track; the device: a group of four named tracks.
    assert any(d.HasField("process") for d in t.tracks.values())
    assert len(t.thread_tracks()) == 1
    (group,) = t.track_named("device mncore2:auto")
    children = sorted((d.sibling_order_rank, d.name) for d in t.tracks.values()
                      if d.parent_uuid == group)
    assert [n for _, n in children] == [n for n, _ in DEVICE_TRACKS]

    (compiled,) = t.named("compile add")
    assert compiled.args["codegen_dir"] == str(tmp_path / "add")
    (call,) = t.named("add")
    assert call.args["function"] == f.key
    record = context.report().calls("add")[-1]
    assert call.args["host_bytes"] == record.bytes["host"] > 0
    assert call.args["compute_bytes"] == record.bytes["compute"] > 0
    assert call.args["cycles"] == record.cycles
    # Each command of the call: a host slice nested in the call, with its figures ...
    commands = [s for s in t.slices if s.parent is call]
    assert [s.name for s in commands] == [c.command.split()[0] for c in record.commands]
    for host, result in zip(commands, record.commands, strict=True):
        assert host.args["command"] == result.command
        assert host.args["cycles"] == result.cycles
        assert host.args["cycles_kind"] == "modeled"
        for path, n in result.bytes.items():
            assert host.args[f"{path}_bytes"] == n
        # ... joined by a flow to its slice on the device's timeline, exactly its cycles long.
        (device,) = [s for s in t.slices if s.terminating == host.flows]
        assert device.args["end_cycle"] - device.args["start_cycle"] == result.cycles
        assert device.start >= host.start
    launch = t.on("compute")
    assert [s.name for s in launch] == [f"Launch {f.key}"]
    writes = [s for s in t.on("host port") if s.name == "HostWrite"]
    assert sum(s.args["host_bytes"] for s in writes) == 2 * inputs["x"].numel() * 4
    (read,) = t.named("z.cpu()")
    assert [s.name for s in t.slices if s.parent is read] == ["HostRead"]
    assert [s.name for s in t.on("host port")][-1] == "HostRead"


def test_load_from_is_an_upload_slice(tmp_path, context):
    out = tmp_path / "upload.pftrace"
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))
    proxies = f.allocate_input_proxy()
    with trace_scope(out):
        for name, proxy in proxies.items():
            proxy.load_from(inputs[name])
        f(proxies)
    t = parse(out)
    (upload,) = t.named("x.load_from()")
    assert [s.name for s in t.slices if s.parent is upload] == ["HostWrite"]
    assert upload.args["host_bytes"] == inputs["x"].numel() * 4
    (call,) = t.named("add")
    assert call.args["host_bytes"] == 0  # the proxies were loaded before the call


def test_compile_slice_takes_the_cache_outcome(tmp_path, context):
    out = tmp_path / "t.pftrace"
    cache = mlsdk.CacheOptions(tmp_path / "cache")
    samples = _pair()
    with trace_scope(out):
        context.compile(add, samples, storage.path(tmp_path / "add1"), cache_options=cache)
        context.compile(add, samples, storage.path(tmp_path / "add2"), cache_options=cache)
        context.compile(add, samples, storage.path(tmp_path / "add3"))
    compiles = parse(out).named("compile add")
    assert [c.args.get("cache") for c in compiles] == ["miss", "hit", "off"]


def test_device_track_runs_one_command_at_a_time(tmp_path, context):
    out = tmp_path / "t.pftrace"
    inputs = _pair()
    with trace_scope(out):
        f = context.compile(add, inputs, storage.path(tmp_path / "add"))
        for _ in range(3):
            f(inputs)["z"].cpu()
    device = sorted((s for s in parse(out).slices if "start_cycle" in s.args),
                    key=lambda s: s.args["start_cycle"])
    mhz = context.device.config.clock_mhz
    for before, after in zip(device, device[1:], strict=False):
        assert after.args["start_cycle"] >= before.args["end_cycle"]
    for s in device:
        cycles = s.args["end_cycle"] - s.args["start_cycle"]
        assert abs((s.end - s.start) - cycles * 1000 / mhz) <= 1


def _handoff_trace(tmp_path: Path, context: Context, constrained: bool) -> tuple[Parsed, Any]:
    sample = torch.randn(SHAPE)
    consume = context.compile(consumer, {"shared": sample}, storage.path(tmp_path / "c"))
    constraints = {"shared": consume.input_specs["shared"]} if constrained else None
    produce = context.compile(producer, {"x": sample}, storage.path(tmp_path / "p"),
                              io_spec_constraints=constraints)
    out = tmp_path / f"handoff_{constrained}.pftrace"
    with trace_scope(out):
        result = consume(produce({"x": sample}))["result"].cpu()
    torch.testing.assert_close(result, sample * 2 + 1)
    parsed = parse(out)
    (call,) = parsed.named("consumer")
    return parsed, call


def test_relocation_leaves_the_converter_idle(tmp_path, context):
    t, call = _handoff_trace(tmp_path, context, constrained=True)
    assert t.on("layout converter") == []
    binds = [s for s in t.on("descriptors")]
    assert [s.name for s in binds] == ["Bind shared"]
    assert binds[0].args["host_bytes"] == binds[0].args["converter_bytes"] == 0
    assert call.args["converter_bytes"] == 0
    assert call.args["Bind_commands"] == 1 and "Convert_commands" not in call.args


def test_conversion_shows_on_the_converter_track(tmp_path, context):
    t, call = _handoff_trace(tmp_path, context, constrained=False)
    (convert,) = t.on("layout converter")
    assert convert.name == "Convert"
    assert convert.args["converter_bytes"] > 0 and convert.args["cycles"] > 0
    assert call.args["Convert_commands"] == 1
    assert call.args["converter_bytes"] == convert.args["converter_bytes"]
    host = [s for s in t.slices if s.flows and s.flows == convert.terminating]
    assert [s.parent.name for s in host] == ["consumer"]


def test_user_events_nest_and_decorate(tmp_path, context):
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))

    @trace_event("step", kind="decorated")
    def step():
        return f(inputs)["z"]

    out = tmp_path / "t.pftrace"
    with trace_scope(out):
        with trace_event("outer", epoch=3):
            with trace_event("inner"):
                assert annotate_current(note="from inside") is True
                step()
                step()
    t = parse(out)
    (outer,) = t.named("outer")
    (inner,) = t.named("inner")
    assert outer.parent is None and inner.parent is outer
    assert outer.args["epoch"] == 3 and inner.args["note"] == "from inside"
    steps = t.named("step")
    assert len(steps) == 2 and all(s.parent is inner for s in steps)
    assert steps[0].args["kind"] == "decorated"
    calls = t.named("add")
    assert [c.parent for c in calls] == steps
    # Outer slices add up the commands of everything inside them.
    assert outer.args["host_bytes"] == sum(c.args["host_bytes"] for c in calls) > 0
    assert outer.args["commands"] == sum(c.args["commands"] for c in calls)


def test_long_traces_are_written_as_they_go(tmp_path, context, monkeypatch):
    monkeypatch.setattr(mlsdk.trace_writer, "_FLUSH_PACKETS", 16)
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))
    out = tmp_path / "t.pftrace"
    with trace_scope(out):
        for _ in range(5):
            f(inputs)
        written = out.stat().st_size
        assert written > 0  # earlier calls are on disk before the scope ends
    assert out.stat().st_size > written
    t = parse(out)
    assert len(t.named("add")) == 5 and len(t.on("compute")) == 5


def test_tracing_off_records_nothing(tmp_path, context):
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))
    with trace_scope(None) as scope:
        assert scope.tracer is None and mlsdk.trace.active is None
        with trace_event("ignored"):
            assert annotate_current(x=1) is False
            f(inputs)["z"].cpu()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add"]
    # Outside any scope too: the hooks are a None check.
    with trace_event("ignored"):
        f(inputs)
    assert mlsdk.trace.active is None


def test_nested_scopes(tmp_path, context):
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))
    outer_file, inner_file = tmp_path / "outer.pftrace", tmp_path / "inner.pftrace"
    with trace_scope(outer_file) as outer:
        with trace_event("before"):
            f(inputs)
        with trace_scope(inner_file) as inner:
            assert mlsdk.trace.active is inner.tracer
            with trace_event("inside"):
                f(inputs)
        with trace_scope(None):
            with trace_event("muted"):
                f(inputs)
        assert mlsdk.trace.active is outer.tracer
        with trace_event("after"):
            f(inputs)
        with pytest.raises(ValueError, match="already writing this file"):
            with trace_scope(outer_file):
                pass
        assert mlsdk.trace.active is outer.tracer
    outer_t, inner_t = parse(outer_file), parse(inner_file)
    assert [s.name for s in outer_t.slices if s.parent is None and s.track in
            outer_t.thread_tracks()] == ["before", "after"]
    assert [s.name for s in inner_t.slices if s.parent is None and s.track in
            inner_t.thread_tracks()] == ["inside"]
    assert not outer_t.named("muted") and not inner_t.named("muted")
    with pytest.raises(RuntimeError, match="already entered"):
        with outer:
            pass


@pytest.mark.parametrize("case", ["missing_dir", "is_dir", "under_file"])
def test_bad_file_names_fail_on_entry(tmp_path, case):
    target = {"missing_dir": tmp_path / "nope" / "t.pftrace", "is_dir": tmp_path,
              "under_file": tmp_path / "file" / "t.pftrace"}[case]
    (tmp_path / "file").write_text("x")
    scope = trace_scope(target)
    with pytest.raises(OSError, match="cannot create the trace file") as info:
        with scope:
            pytest.fail("the block must not run")
    assert str(target) in str(info.value)
    if case == "missing_dir":
        assert isinstance(info.value, FileNotFoundError)
        assert "does not exist" in str(info.value)
    assert mlsdk.trace.active is None


def test_unwritable_directory(tmp_path):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="cannot create the trace file"):
            with trace_scope(folder / "t.pftrace"):
                pass
    finally:
        folder.chmod(0o700)


def test_permission_denied_message(tmp_path, monkeypatch):
    # Root writes anywhere: the refusal itself is simulated, the message is what is checked.
    def refuse(path, mode):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(mlsdk.trace, "open", refuse, raising=False)
    with pytest.raises(PermissionError, match="Permission denied; give a file name"):
        with trace_scope(tmp_path / "t.pftrace"):
            pytest.fail("the block must not run")
    assert mlsdk.trace.active is None


def test_a_failed_write_is_reported_on_exit(tmp_path, context):
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))

    def full(packet):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="could not write the trace file.*No space left"):
        with trace_scope(tmp_path / "t.pftrace") as scope:
            scope.tracer._builder.write_packet = full
            z = f(inputs)["z"].cpu()  # the program itself goes on
    torch.testing.assert_close(z, inputs["x"] + inputs["y"])


@pytest.mark.parametrize("bad", [3, b"t.pftrace", ""])
def test_bad_file_name_types(bad):
    with pytest.raises(TypeError, match="trace_scope"):
        trace_scope(bad)
    with pytest.raises(TypeError, match="non-empty str name"):
        trace_event(bad)


def test_threads_get_their_own_tracks(tmp_path):
    out = tmp_path / "t.pftrace"
    barrier = threading.Barrier(2)

    def work(name):
        with trace_event(name):
            barrier.wait(timeout=10)

    with trace_scope(out):
        threads = [threading.Thread(target=work, args=(f"t{i}",), name=f"worker{i}")
                   for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    t = parse(out)
    names = {d.thread.thread_name: u for u, d in t.thread_tracks().items()}
    assert {"worker0", "worker1"} <= set(names)
    (s0,), (s1,) = t.named("t0"), t.named("t1")
    assert (s0.track, s1.track) == (names["worker0"], names["worker1"])


def test_errors_are_recorded_and_the_file_completed(tmp_path, context):
    inputs = _pair()
    f = context.compile(add, inputs, storage.path(tmp_path / "add"))
    out = tmp_path / "t.pftrace"
    with pytest.raises(mlsdk.InputError):
        with trace_scope(out):
            with trace_event("failing"):
                f({"x": inputs["x"], "y": torch.ones(2, 2)})
    t = parse(out)
    (call,) = t.named("add")
    assert "InputError" in call.args["error"]
    assert t.named("failing")[0].args.get("unfinished") is None


def test_reference_device_traces_host_activity(tmp_path):
    inputs = _pair()
    out = tmp_path / "t.pftrace"
    with Context(MNDevice("pfvm:cpu")) as ctx, trace_scope(out):
        f = ctx.compile(add, inputs, storage.path(tmp_path / "add"))
        z = f(inputs)["z"].cpu()
    torch.testing.assert_close(z, inputs["x"] + inputs["y"])
    t = parse(out)
    assert [s.name for s in t.slices] == ["compile add", "add", "z.cpu()"]
    assert not t.track_named("device pfvm:cpu")


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_example_runs(tmp_path, device):
    out = tmp_path / "example.pftrace"
    lines = run_example("trace_add.py", device, str(out), cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "trace_add succeeded"
    t = parse(out)
    assert t.named("add two tensors") and t.named("add")
    assert bool(t.on("compute")) == (device == "mncore2:auto")
