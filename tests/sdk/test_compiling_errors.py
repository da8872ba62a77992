"""Context.compile errors that save rounds: every unsupported op of a model in one error, each
with the user's source line; torch's own errors while tracing named at the user's line."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from mlsdk import CodegenError, Context, MNDevice, storage
from mncore_compiler.errors import TraceError, UnsupportedOperationError

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
