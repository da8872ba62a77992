"""Context.compile errors that save rounds: every unsupported op of a model in one error, each
with the user's source line; torch's own errors while tracing named at the user's line; a
function that writes its samples (left untouched), zero-size tensors and codegen directories
that cannot be written, each a clear error."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from mlsdk import CodegenError, Context, MNDevice, storage
from mncore_compiler.errors import CaptureError, TraceError, UnsupportedOperationError

HERE = "tests/sdk/test_compiling_errors.py"


class Net(torch.nn.Module):
    """A Linear model with three ops the compiler does not have, in forward and backward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.lgamma(self.fc(x))
        x = torch.logcumsumexp(x, 1)
        return torch.kthvalue(x, 1, keepdim=True).values


def test_a_training_step_lists_every_missing_op_once(tmp_path):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(d):
        opt.zero_grad()
        loss = F.mse_loss(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}

    batch = {"x": torch.randn(4, 6), "y": torch.randn(4, 6)}
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        with pytest.raises(UnsupportedOperationError) as info:
            context.compile(step, batch, storage.path(tmp_path / "step"))
    ops = [problem.split(" ", 1)[0] for problem, _ in info.value.problems]
    assert set(ops) >= {"aten.lgamma.default", "aten.logcumsumexp.default",
                        "aten.kthvalue.default"}
    assert len(ops) == len(set(ops))  # each op once, however often the trace uses it
    where = dict(info.value.problems)
    forward = {p.split(" ", 1)[0]: w for p, w in where.items()}
    assert re.match(rf"{HERE}:\d+ in forward: x = torch.logcumsumexp\(x, 1\)",
                    forward["aten.logcumsumexp.default"])
    message = str(info.value)
    assert len(message.splitlines()) == 2 * len(ops) + 2
    assert message.endswith("Supported ops: mlsdk.supported_ops(), listed in docs/ops.md.")


def test_a_plain_function_names_its_own_line(tmp_path):
    def fn(d):
        y = d["x"] * 2
        return {"y": torch.special.bessel_j0(y)}

    with Context(MNDevice("mncore2:auto")) as context, pytest.raises(
            UnsupportedOperationError, match=rf"\n  at {HERE}:\d+ in fn: return .*bessel_j0"):
        context.compile(fn, {"x": torch.ones(3)}, storage.path(tmp_path / "fn"))


def test_a_torch_error_while_tracing_is_the_kits_error(tmp_path):
    model = torch.nn.Linear(6, 4)

    def fn(d):
        return {"y": model(d["x"])}

    with Context(MNDevice("mncore2:auto")) as context, pytest.raises(
            TraceError, match=rf"(?s)mat1 and mat2.*\n  at {HERE}:\d+ in fn: return .*model"):
        context.compile(fn, {"x": torch.ones(3, 5)}, storage.path(tmp_path / "fn"))


def add_one(inputs):
    return {"out": inputs["x"] + 1}


def test_a_codegen_directory_2000_levels_deep_is_a_codegen_error(context, tmp_path):
    deep = storage.path(tmp_path).joinpath(*["d"] * 2000)
    with pytest.raises(CodegenError, match="2[0-9]{3} levels deep|File name too long"):
        context.compile(add_one, {"x": torch.randn(4)}, deep)


def double(inputs):
    return {"y": inputs["x"] * 2}


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


@pytest.mark.parametrize("shape", [(0,), (0, 4), (4, 0)])
def test_zero_size_input_is_named(context, tmp_path, shape):
    with pytest.raises(CaptureError, match=r"sample input 'x' has zero elements.*not supported"):
        context.compile(double, {"x": torch.ones(shape)}, storage.path(tmp_path / "z"))


def test_zero_size_output_is_named(context, tmp_path):
    with pytest.raises(CaptureError, match=r"output 'y' has zero elements"):
        context.compile(lambda d: {"y": d["x"][:0] * 2}, {"x": torch.ones(4, 4)},
                        storage.path(tmp_path / "z"))


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
