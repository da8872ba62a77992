"""Inputs and files that used to give raw errors or silent damage: each a clear error now."""

from __future__ import annotations

import json
import resource
import signal
from pathlib import Path

import pytest
import torch
from mlsdk import CodegenError, storage
from mlsdk.iospec import IOSpec
from mncore_compiler.errors import CaptureError
from mncore_hdl.layout import Layout


def double(inputs):
    return {"y": inputs["x"] * 2}


# -- compiling never touches the caller's tensors -----------------------------------------------


def test_compile_of_an_in_place_function_leaves_the_samples_alone(context, tmp_path):
    sample = torch.ones(4, 4)

    def scale_in_place(inputs):
        inputs["x"].mul_(3)  # rejected by the compiler, after tracing ran it
        return {"y": inputs["x"] + 1}

    with pytest.raises(CaptureError, match="updates its input 'x' in place"):
        context.compile(scale_in_place, {"x": sample}, storage.path(tmp_path / "f"))
    assert torch.equal(sample, torch.ones(4, 4))


def test_compile_of_a_function_that_writes_its_input_via_a_view(context, tmp_path):
    sample = torch.arange(16.0).reshape(4, 4)
    before = sample.clone()

    def writes_a_row(inputs):
        inputs["x"][0].fill_(7)
        return {"y": inputs["x"] * 2}

    with pytest.raises(Exception):  # noqa: B017 - whichever the compiler raises
        context.compile(writes_a_row, {"x": sample}, storage.path(tmp_path / "g"))
    assert torch.equal(sample, before)


# -- zero-size tensors ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0,), (0, 4), (4, 0)])
def test_zero_size_input_is_named(context, tmp_path, shape):
    with pytest.raises(CaptureError, match=r"sample input 'x' has zero elements.*not supported"):
        context.compile(double, {"x": torch.ones(shape)}, storage.path(tmp_path / "z"))


def test_zero_size_output_is_named(context, tmp_path):
    with pytest.raises(CaptureError, match=r"output 'y' has zero elements"):
        context.compile(lambda d: {"y": d["x"][:0] * 2}, {"x": torch.ones(4, 4)},
                        storage.path(tmp_path / "z"))


# -- IOSpec ---------------------------------------------------------------------------------


def test_iospec_dtype_must_match_its_layout():
    layout = Layout.parse("(4,4)/((4:4), (4:1))", "float32")
    assert IOSpec("x", (4, 4), torch.float32, layout).dtype == torch.float32
    with pytest.raises(ValueError, match="dtype float16 disagrees with its layout's element "
                                         "type float32"):
        IOSpec("x", (4, 4), torch.float16, layout)
    with pytest.raises(ValueError, match=r"shape \(2, 8\) disagrees with its layout's shape"):
        IOSpec("x", (2, 8), torch.float32, layout)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"):
        IOSpec("x", (4, 4), "float32", layout)  # type: ignore[arg-type]


# -- the codegen directory ------------------------------------------------------------------


def test_unwritable_codegen_directory_is_a_codegen_error(context, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CodegenError, match=f"Cannot write the codegen directory.*{blocker}"):
        context.compile(double, {"x": torch.ones(4, 4)}, storage.path(blocker / "out"))


def test_read_only_codegen_directory_is_a_codegen_error(context, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(CodegenError, match=f"Cannot write the codegen directory.*{locked}"):
            context.compile(double, {"x": torch.ones(4, 4)}, storage.path(locked / "out"))
    finally:
        locked.chmod(0o755)


def test_a_write_failing_half_way_leaves_the_old_program_whole(context, tmp_path):
    """A file-size limit makes the OS fail the write part-way, as a full disk would."""
    out = tmp_path / "prog"
    context.compile(double, {"x": torch.ones(4, 4)}, storage.path(out))
    before = (out / "program.json").read_bytes()
    assert len(before) > 600

    def bigger(inputs):
        return {"y": (inputs["x"] * 3 + 1).relu() - inputs["x"]}

    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, limits[1]))
    try:
        with pytest.raises(CodegenError, match="Cannot write the codegen directory"):
            context.compile(bigger, {"x": torch.ones(4, 4)}, storage.path(out))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert (out / "program.json").read_bytes() == before
    assert json.loads(before)["name"] == "double"
    reloaded = context.load_codegen_dir(storage.path(out))
    assert reloaded({"x": torch.ones(4, 4)})["y"].cpu().eq(2).all()
    assert not [p for p in out.rglob("*.tmp")], "temporary files left behind"


# -- the cached Icarus build ----------------------------------------------------------------


def _fake_vvp(n_files: int = 2) -> str:
    names = "".join(f'    "file{i}.v";\n' for i in range(n_files))
    return ("#! /usr/bin/vvp\n:ivl_version \"11.0 (stable)\";\n" + "S_0 .scope module;\n" * 50
            + f":file_names {n_files};\n" + names)


@pytest.fixture
def fake_icarus(monkeypatch, tmp_path):
    """build_icarus with the export and iverilog replaced by a writer of a small vvp."""
    import cocotb_tools.runner
    import mncore_hdl.top.cosim_tb
    from mlsdk.device.rtl import builds as icarus

    builds: list[Path] = []
    verilog = tmp_path / "verilog" / "cosim_top-abc" / "cosim_top.v"

    def export(config, root):
        verilog.parent.mkdir(parents=True, exist_ok=True)
        verilog.write_text("module cosim_tb; endmodule\n")
        return [verilog]

    class Runner:
        def build(self, *, build_dir, **kwargs):
            builds.append(Path(build_dir))
            (Path(build_dir) / "sim.vvp").write_text(_fake_vvp())

    monkeypatch.setattr(icarus, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(mncore_hdl.top.cosim_tb, "export_cosim_tb", export)
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda name: Runner())
    return icarus, builds


def test_truncated_vvp_cache_is_rebuilt(fake_icarus):
    from mncore_hdl.arch import MNCORE2_SIM

    icarus, builds = fake_icarus
    build_dir = icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 1
    icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 1, "a complete cache entry is reused"
    vvp = build_dir / "sim.vvp"
    whole = vvp.read_text()
    vvp.write_text(whole[: len(whole) // 2])  # an interrupted build
    icarus.build_icarus(MNCORE2_SIM)
    assert len(builds) == 2 and vvp.read_text() == whole


def test_vvp_that_stays_broken_names_the_file(fake_icarus, monkeypatch):
    import cocotb_tools.runner
    from mncore_hdl.arch import MNCORE2_SIM

    icarus, builds = fake_icarus

    class Broken:
        def build(self, *, build_dir, **kwargs):
            (Path(build_dir) / "sim.vvp").write_text("#! /usr/bin/vvp\n:ivl_version")

    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda name: Broken())
    with pytest.raises(RuntimeError, match=r"incomplete .*sim\.vvp; delete it"):
        icarus.build_icarus(MNCORE2_SIM)


# -- hand-offs between equivalent layouts of different footprints ---------------------------


def test_equivalent_layouts_with_different_footprints_are_converted(context, tmp_path):
    """(5)/((5:1)) and (5)/((3:2, 2:1)) place every element alike, but the second pads to 6
    LW: binding the 5-LW buffer to it made Launch read a short image (found by the soak)."""
    dense = Layout.parse("(5)/((5:1))", "bfloat16")
    padded = Layout.parse("(5)/((3:2, 2:1))", "bfloat16")
    assert dense.equivalent(padded) and dense.lw_per_group != padded.lw_per_group
    sample = torch.zeros(5, dtype=torch.bfloat16)
    consumer = context.compile(lambda d: {"z": d["y"] + 1}, {"y": sample},
                               storage.path(tmp_path / "c"), io_spec_constraints={"y": padded})
    producer = context.compile(lambda d: {"y": d["x"] * 2}, {"x": sample},
                               storage.path(tmp_path / "p"), io_spec_constraints={"y": dense})
    assert not producer.output_specs["y"].is_memcopyable_to(consumer.input_specs["y"])
    assert "footprint 1x5 LW vs 1x6 LW" in producer.output_specs["y"].describe_difference(
        consumer.input_specs["y"])
    x = torch.arange(5, dtype=torch.bfloat16)
    out = consumer({"y": producer({"x": x})["y"]})["z"].cpu()
    assert torch.equal(out, x * 2 + 1)
    assert context.report().calls()[-1].conversions == 1
