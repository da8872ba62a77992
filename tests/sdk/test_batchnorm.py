"""BatchNorm on the device: train() and eval() semantics, running statistics as registered
buffers updated by a compiled training step.

Tolerance: as ``tests/sdk/test_training.py``, ``rtol=1e-5, atol=1e-6`` (float32) for losses,
parameters and running statistics at every step of a 20-step run. The device follows torch's
CPU batch-norm kernel, but torch keeps a few per-channel scalars (the inverse standard
deviation, the running-statistics update) in double, where the device computes in float32.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from mlsdk import Context, MNDevice, storage
from mlsdk.testing.training import sgd_with_momentum
from mncore_compiler.errors import CaptureError

RTOL, ATOL = 1e-5, 1e-6
DEVICES = ["mncore2:auto", "pfvm:cpu"]
STEPS = 20


def _bn_mlp(affine: bool = True, momentum: float | None = 0.1) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16, affine=affine, momentum=momentum),
        torch.nn.ReLU(), torch.nn.Linear(16, 4),
    )


def _sgd(model: torch.nn.Module, context: Context | None = None) -> torch.optim.SGD:
    """SGD with momentum over ``model``, its momentum buffers created (and registered)."""
    return sgd_with_momentum(model, context)


def _batches(steps: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(8, 6, generator=g) * 2 + 1,
             "y": torch.randint(0, 4, (8,), generator=g)} for _ in range(steps)]


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer):
    def train_step(d):
        opt.zero_grad()
        loss = F.cross_entropy(model(d["x"]), d["y"])
        loss.backward()
        opt.step()
        return {"loss": loss}
    return train_step


def _assert_state_close(model: torch.nn.Module, reference: torch.nn.Module) -> None:
    ours, theirs = model.state_dict(), reference.state_dict()
    assert list(ours) == list(theirs)
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=RTOL, atol=ATOL, msg=name)


@pytest.fixture(params=DEVICES)
def context(request):
    with Context(MNDevice(request.param)) as ctx:
        yield ctx


def _train(context: Context, tmp_path, affine: bool = True,
           momentum: float | None = 0.1):
    """Train a BatchNorm MLP 20 steps on the device and in torch, checking every loss."""
    torch.manual_seed(3)
    model = _bn_mlp(affine, momentum)
    reference = copy.deepcopy(model)
    names = context.registry.register("model", model)
    assert {"model.1.running_mean", "model.1.running_var",
            "model.1.num_batches_tracked"} <= set(names)
    opt, ref_opt = _sgd(model, context), _sgd(reference)
    before = copy.deepcopy(model.state_dict())
    batches = _batches(STEPS)
    step = context.compile(_step(model, opt), batches[0], storage.path(tmp_path / "step"))
    writes = step.program.state_writes
    assert {"model.1.running_mean", "model.1.running_var", "model.1.num_batches_tracked"} <= set(
        writes)
    for batch in batches:
        loss = step(batch)["loss"].item()
        ref_loss = _step(reference, ref_opt)(batch)["loss"].item()
        assert loss == pytest.approx(ref_loss, rel=RTOL, abs=ATOL)
    # The host tensors (buffers included) are unchanged until synchronize().
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    context.synchronize()
    _assert_state_close(model, reference)
    assert int(model[1].num_batches_tracked) == STEPS
    return model, reference, opt, ref_opt


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no-affine"])
def test_train_mode_matches_torch_step_by_step(context, tmp_path, affine):
    model, reference, opt, ref_opt = _train(context, tmp_path, affine)
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(opt.state[p]["momentum_buffer"],
                                   ref_opt.state[ref]["momentum_buffer"], rtol=RTOL, atol=ATOL)


def test_eval_after_training_uses_the_running_statistics(context, tmp_path):
    model, reference, _, _ = _train(context, tmp_path)
    model.eval()
    reference.eval()
    x = _batches(1, seed=7)[0]["x"]
    infer = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                            storage.path(tmp_path / "eval"), training=False)
    assert not infer.program.state_writes
    y = infer({"x": x})["y"].cpu()
    torch.testing.assert_close(y, reference(x).detach(), rtol=RTOL, atol=ATOL)
    # Not the batch statistics: train mode gives another result.
    reference.train()
    with torch.no_grad():
        assert not torch.allclose(y, reference(x), rtol=1e-3, atol=1e-3)


def test_eval_reads_the_device_copy_of_the_running_statistics(tmp_path):
    # Compiled and run before synchronize(): the eval function reads the running statistics the
    # training step wrote on the device, not the stale host tensors.
    with Context(MNDevice("mncore2:auto")) as context:
        torch.manual_seed(3)
        model = _bn_mlp()
        reference = copy.deepcopy(model)
        context.registry.register("model", model)
        opt, ref_opt = _sgd(model, context), _sgd(reference)
        batches = _batches(5)
        step = context.compile(_step(model, opt), batches[0], storage.path(tmp_path / "step"))
        for batch in batches:
            step(batch)
            _step(reference, ref_opt)(batch)
        model.eval()
        reference.eval()
        x = batches[0]["x"]
        infer = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                                storage.path(tmp_path / "eval"))
        torch.testing.assert_close(infer({"x": x})["y"].cpu(), reference(x).detach(),
                                   rtol=RTOL, atol=ATOL)


def test_frozen_batchnorm_in_eval_mode_trains_the_rest(context, tmp_path):
    # BatchNorm in eval() inside a training step: the running statistics normalise, are not
    # updated, and the backward goes through them (native_batch_norm_backward, train=False).
    torch.manual_seed(4)
    model = _bn_mlp()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    model[1].eval()
    reference = copy.deepcopy(model)
    context.registry.register("model", model)
    opt, ref_opt = _sgd(model, context), _sgd(reference)
    batches = _batches(5)
    step = context.compile(_step(model, opt), batches[0], storage.path(tmp_path / "step"))
    assert not any("running" in name or "num_batches" in name
                   for name in step.program.state_writes)
    for batch in batches:
        loss = step(batch)["loss"].item()
        assert loss == pytest.approx(_step(reference, ref_opt)(batch)["loss"].item(),
                                     rel=RTOL, abs=ATOL)
    context.synchronize()
    _assert_state_close(model, reference)


@pytest.mark.parametrize("shape,bn", [
    ((8, 4, 5), lambda: torch.nn.BatchNorm1d(4)),
    ((4, 3, 5, 6), lambda: torch.nn.BatchNorm2d(3, momentum=0.3)),
    ((4, 3, 5, 6), lambda: torch.nn.BatchNorm2d(3, momentum=None)),
], ids=["1d-NCL", "2d-NCHW", "2d-cumulative"])
def test_batchnorm_of_rank_3_and_4(tmp_path, shape, bn):
    with Context(MNDevice("mncore2:auto")) as context:
        torch.manual_seed(5)
        model = torch.nn.Sequential(bn(), torch.nn.Tanh())
        reference = copy.deepcopy(model)
        context.registry.register("model", model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        w = torch.randn(shape)

        def make(m, o):
            def step(d):
                o.zero_grad()
                loss = (m(d["x"]) * w).sum()
                loss.backward()
                o.step()
                return {"loss": loss}
            return step

        x = torch.randn(shape)
        step = context.compile(make(model, opt), {"x": x}, storage.path(tmp_path / "step"))
        for i in range(3):
            loss = step({"x": x * (i + 1)})["loss"].item()
            ref = make(reference, ref_opt)({"x": x * (i + 1)})["loss"].item()
            assert loss == pytest.approx(ref, rel=RTOL, abs=1e-5)
        context.synchronize()
        _assert_state_close(model, reference)


# -- train mode in an inference function --------------------------------------------------------


def test_train_mode_inference_updates_the_running_statistics(tmp_path):
    # torch semantics: a BatchNorm in train() mode normalises with the batch statistics and
    # updates its running statistics, also under no_grad. Compiled without training=..., that
    # is a state write, as in torch.
    with Context(MNDevice("mncore2:auto")) as context:
        torch.manual_seed(6)
        model = _bn_mlp()
        reference = copy.deepcopy(model)
        context.registry.register("model", model)
        x = _batches(1)[0]["x"]
        fn = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                             storage.path(tmp_path / "f"))
        assert set(fn.program.state_writes) == {
            "model.1.running_mean", "model.1.running_var", "model.1.num_batches_tracked"}
        for _ in range(2):
            y = fn({"x": x})["y"].cpu()
            with torch.no_grad():
                torch.testing.assert_close(y, reference(x), rtol=RTOL, atol=ATOL)
        context.synchronize()
        _assert_state_close(model, reference)


def test_train_mode_with_training_false_is_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = _bn_mlp()
        context.registry.register("model", model)
        x = _batches(1)[0]["x"]
        with pytest.raises(CaptureError, match=r"training=False.*running_mean.*eval\(\)"):
            context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                            storage.path(tmp_path / "f"), training=False)
        assert int(model[1].num_batches_tracked) == 0  # tracing's update was put back
        model.eval()
        assert context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                               storage.path(tmp_path / "f"), training=False)


def test_unregistered_running_statistics_are_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = _bn_mlp()
        x = _batches(1)[0]["x"]
        stats = r"model\.1\.(running_mean|running_var|num_batches_tracked)"
        with pytest.raises(CaptureError, match=stats + ".*not registered"):
            context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                            storage.path(tmp_path / "f"))
        model.eval()  # eval mode writes nothing: unregistered constants are fine
        y = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                            storage.path(tmp_path / "f"))({"x": x})["y"].cpu()
        torch.testing.assert_close(y, model(x).detach(), rtol=RTOL, atol=ATOL)


def test_momentum_none_is_a_cumulative_average_on_the_device(context, tmp_path):
    # momentum=None: running statistics = the plain average of every batch's statistics, the
    # factor 1 / num_batches_tracked changing at every step. One compiled step must follow it
    # (a factor baked in at trace time would give step 1's factor, 1.0, at every step).
    # _train compares every loss and, after synchronize(), the running statistics with torch.
    model, _, _, _ = _train(context, tmp_path, momentum=None)
    assert model[1].momentum is None
    assert "forward" not in vars(model[1])  # its own forward is back after compiling


def test_momentum_none_in_eval_mode_reads_the_running_statistics(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = _bn_mlp(momentum=None).eval()
        x = _batches(1)[0]["x"]
        y = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                            storage.path(tmp_path / "g"))({"x": x})["y"].cpu()
        torch.testing.assert_close(y, model(x).detach(), rtol=RTOL, atol=ATOL)


def test_without_running_statistics_the_batch_statistics_are_used(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.BatchNorm1d(5, track_running_stats=False).eval()
        x = torch.randn(7, 5)
        fn = context.compile(lambda d: {"y": model(d["x"])}, {"x": x},
                             storage.path(tmp_path / "f"), training=False)
        torch.testing.assert_close(fn({"x": x})["y"].cpu(), model(x).detach(),
                                   rtol=RTOL, atol=ATOL)
