"""Bad input: each a clear error that leaves device state and the user's data intact."""

from __future__ import annotations

import json

import pytest
import torch
from mlsdk import (
    CodegenError,
    Context,
    DeviceMemoryError,
    InputError,
    IOSpecMismatchError,
    MNDevice,
    StaleTensorError,
    storage,
)
from mncore_compiler.layouts import ConstraintError
from mncore_hdl.arch import MNCORE2


def double(inputs):
    return {"y": inputs["x"] * 2}


def inc(inputs):
    return {"out": inputs["y"] + 1}


@pytest.fixture
def pair(context, tmp_path):
    sample = torch.randn(32, 64)
    d = context.compile(double, {"x": sample}, storage.path(tmp_path / "d"))
    i = context.compile(inc, {"y": sample}, storage.path(tmp_path / "i"))
    return d, i


def _state(context):
    device = context.device
    return (len(context.report()), dict(device.allocator.live),
            dict(device.descriptors), [d.snapshot().keys() for d in device.drams])


def test_unknown_device_lists_the_valid_strings():
    with pytest.raises(ValueError, match="Unknown device 'mncore3:0'.*mncore2:auto.*pfvm:cpu"):
        MNDevice("mncore3:0")
    with pytest.raises(TypeError, match="Device name must be a string"):
        MNDevice(3)  # type: ignore[arg-type]


def test_constraint_key_that_is_no_io(context, tmp_path, pair):
    d, i = pair
    with pytest.raises(ConstraintError, match=r"'shred' is not an input or output.*\['x', 'y'\]"):
        context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "e"),
                        io_spec_constraints={"shred": i.input_specs["y"]})


def test_constraint_that_cannot_fit(context, tmp_path, pair):
    d, i = pair
    with pytest.raises(ConstraintError, match="describes a float32 tensor of shape \\(32, 64\\), "
                                              "but 'y' is a float32 tensor of shape \\(16, 64\\)"):
        context.compile(double, {"x": torch.randn(16, 64)}, storage.path(tmp_path / "e"),
                        io_spec_constraints={"y": i.input_specs["y"]})
    half = context.compile(inc, {"y": torch.randn(32, 64).half()}, storage.path(tmp_path / "h"))
    with pytest.raises(ConstraintError, match="float16 tensor"):
        context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "e2"),
                        io_spec_constraints={"y": half.input_specs["y"]})
    with pytest.raises(TypeError, match="must be an IOSpec"):
        context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "e3"),
                        io_spec_constraints={"y": 3})
    # A str names an input of the same function (loop-carried state): one that is none is a
    # ConstraintError listing the inputs.
    with pytest.raises(ConstraintError, match=r"'rows': a str value must name an input.*\['x'\]"):
        context.compile(double, {"x": torch.randn(32, 64)}, storage.path(tmp_path / "e4"),
                        io_spec_constraints={"y": "rows"})


def test_unknown_option_and_training(context, tmp_path):
    with pytest.raises(ValueError, match=r"Unknown compile option\(s\) \['fast'\].*float_dtype"):
        context.compile(double, {"x": torch.ones(4)}, storage.path(tmp_path), options={"fast": 1})
    with pytest.raises(TypeError, match="updates no registered tensor"):
        context.compile(double, {"x": torch.ones(4)}, storage.path(tmp_path), training=True)
    with pytest.raises(TypeError, match="storage.path"):
        context.compile(double, {"x": torch.ones(4)}, str(tmp_path))


def test_missing_extra_wrong_inputs_leave_the_device_untouched(context, pair):
    d, i = pair
    before = _state(context)
    x = torch.randn(32, 64)
    x_copy = x.clone()
    with pytest.raises(InputError, match=r"missing \['x'\], unexpected \['z'\]"):
        d({"z": x})
    with pytest.raises(InputError, match=r"unexpected \['extra'\]"):
        d({"x": x, "extra": x})
    with pytest.raises(InputError, match="must be a float32 tensor of shape \\(32, 64\\), not "
                                         "float32 of shape \\(64, 32\\)"):
        d({"x": x.t()})
    with pytest.raises(InputError, match="not float16"):
        d({"x": x.half()})
    with pytest.raises(InputError, match="must be a torch.Tensor or a TensorProxy, not list"):
        d({"x": [1, 2]})
    with pytest.raises(InputError, match="takes a dict of inputs"):
        d(x)
    assert _state(context) == before
    assert torch.equal(x, x_copy)


def test_proxy_of_incompatible_shape_names_both_specs(context, tmp_path, pair):
    d, _ = pair
    other = context.compile(inc, {"y": torch.randn(16, 64)}, storage.path(tmp_path / "o"))
    y = d({"x": torch.randn(32, 64)})["y"]
    before = _state(context)
    with pytest.raises(IOSpecMismatchError, match="IOSpec\\('y': 32x64.*expects IOSpec\\('y': "
                                                  "16x64.*shape \\(32, 64\\) vs \\(16, 64\\)"):
        other({"y": y})
    assert _state(context) == before


def test_proxy_from_another_context(pair, tmp_path):
    d, _ = pair
    y = d({"x": torch.randn(32, 64)})["y"]
    with Context(MNDevice("mncore2:auto")) as other:
        i2 = other.compile(inc, {"y": torch.randn(32, 64)}, storage.path(tmp_path / "o"))
        with pytest.raises(StaleTensorError, match="belongs to another Context"):
            i2({"y": y})


def test_freed_proxy(context, pair):
    d, i = pair
    y = d({"x": torch.randn(32, 64)})["y"]
    y.free()
    with pytest.raises(StaleTensorError, match="buffer was freed"):
        i({"y": y})
    with pytest.raises(StaleTensorError, match="buffer was freed"):
        y.cpu()


def test_closed_context(context, pair):
    d, i = pair
    y = d({"x": torch.randn(32, 64)})["y"]
    context.close()
    with pytest.raises(StaleTensorError):
        y.cpu()
    with pytest.raises(Exception, match="closed"):
        d({"x": torch.randn(32, 64)})


def test_buffers_are_freed_with_their_proxies(context, pair):
    d, _ = pair
    live = len(context.device.allocator.live)
    y = d({"x": torch.randn(32, 64)})["y"]
    assert len(context.device.allocator.live) == live + 1
    del y
    assert len(context.device.allocator.live) == live


def test_device_dram_exhausted(tmp_path):
    small = MNCORE2.replace(dram_bytes_per_group=64 * 1024, sim_window_lw=4096)
    with Context(MNDevice("mncore2:auto", config=small)) as ctx:
        f = ctx.compile(double, {"x": torch.randn(64, 64)}, storage.path(tmp_path / "f"))
        keep = [f({"x": torch.randn(64, 64)}) for _ in range(4)]
        before = _state(ctx)
        with pytest.raises(DeviceMemoryError, match=r"Device DRAM exhausted.*Held by: "
                           r"TensorProxies \(outputs of double#1\).*\.free\(\)"):
            for _ in range(64):
                keep.append(f({"x": torch.randn(64, 64)}))
        assert len(ctx.device.allocator.live) == len(before[1]) + len(keep) - 4
        torch.testing.assert_close(keep[0]["y"].cpu().shape, torch.Size([64, 64]))


class TestCodegen:
    def test_load_round_trip(self, context, tmp_path):
        path = storage.path(tmp_path / "d")
        context.compile(double, {"x": torch.randn(8, 8)}, path)
        f = context.load_codegen_dir(path)
        x = torch.randn(8, 8)
        torch.testing.assert_close(f({"x": x})["y"].cpu(), x * 2)
        assert (tmp_path / "d" / "program.txt").read_text().startswith("program double")

    def test_missing_directory(self, context, tmp_path):
        with pytest.raises(CodegenError, match="does not exist"):
            context.load_codegen_dir(storage.path(tmp_path / "nowhere"))
        (tmp_path / "empty").mkdir()
        with pytest.raises(CodegenError, match="holds no program.json"):
            context.load_codegen_dir(storage.path(tmp_path / "empty"))

    def test_other_version(self, context, tmp_path):
        path = storage.path(tmp_path / "d")
        context.compile(double, {"x": torch.randn(8, 8)}, path)
        program = tmp_path / "d" / "program.json"
        body = json.loads(program.read_text())
        body["version"] = 99
        program.write_text(json.dumps(body))
        with pytest.raises(CodegenError, match="format version 99; this kit reads version 1"):
            context.load_codegen_dir(path)

    def test_corrupt(self, context, tmp_path):
        path = storage.path(tmp_path / "d")
        lin = torch.nn.Linear(8, 8)
        context.compile(lambda d: {"y": lin(d["x"])}, {"x": torch.randn(2, 8)}, path)
        program = tmp_path / "d" / "program.json"
        text = program.read_text()
        program.write_text(text[: len(text) // 2])
        with pytest.raises(CodegenError, match="not valid JSON"):
            context.load_codegen_dir(path)
        program.write_text(text.replace('"name"', '"nmae"', 1))
        with pytest.raises(CodegenError, match="corrupt"):
            context.load_codegen_dir(path)
        program.write_text(text)
        constant = sorted((tmp_path / "d" / "constants").iterdir())[0]
        constant.write_bytes(constant.read_bytes()[:-4] + b"\0\0\0\1")
        with pytest.raises(CodegenError, match="Constant file .* is corrupt"):
            context.load_codegen_dir(path)


def test_poke_checks_its_image_and_buffer(context):
    """The back door stores an image of the buffer's shape and nothing else."""
    import numpy as np
    from mlsdk.errors import DeviceError
    from mncore_hdl.layout import host_layout

    device = context.device
    buf = device.allocate(host_layout((4, 64)))
    image = np.arange(buf.groups * buf.lw_per_group, dtype=np.uint64).reshape(buf.groups, -1)
    device.poke(buf, image)
    assert (device.peek(buf) == image).all()
    with pytest.raises(ValueError,
                       match=r"shape \(1, 128\), not a uint64 array of shape \(1, 127\)"):
        device.poke(buf, image[:, :-1] + 1)
    with pytest.raises(ValueError, match="not list"):
        device.poke(buf, (image + 1).tolist())
    with pytest.raises(ValueError, match=r"not a float64 array of shape \(1, 128\)"):
        device.poke(buf, image.astype(np.float64) + 1)
    assert (device.peek(buf) == image).all()
    device.free(buf)
    with pytest.raises(DeviceError, match="is not allocated"):
        device.poke(buf, image)
