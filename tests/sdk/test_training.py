"""Training on the device: a compiled step (forward, backward, optimizer.step()) matches torch.

Tolerance: the device computes the same aten ops as torch, decomposed in torch's own order, but
matmuls and reductions may associate differently; losses and parameters are compared with
``rtol=1e-5, atol=1e-6`` (float32) at every step of a 20-step run.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from mlsdk import Context, MNDevice, set_tensor_name, storage
from mlsdk.errors import OptimizerChangedError
from mlsdk.testing.training import loss_for, make_batches, make_train_step, mlp, model_for
from mncore_compiler.errors import CaptureError, UnsupportedOperationError

RTOL, ATOL = 1e-5, 1e-6
DEVICES = ["mncore2:auto", "pfvm:cpu"]
SGD_SETTINGS = [
    {"momentum": 0.0, "weight_decay": 0.0, "nesterov": False},
    {"momentum": 0.9, "weight_decay": 0.0, "nesterov": False},
    {"momentum": 0.9, "weight_decay": 0.01, "nesterov": False},
    {"momentum": 0.9, "weight_decay": 0.01, "nesterov": True},
    {"momentum": 0.0, "weight_decay": 0.05, "nesterov": False},
]


def _setup(context: Context, model: torch.nn.Module, settings: dict, lr: float = 0.1):
    """Register the model and an SGD over it, its momentum buffers created and registered."""
    context.registry.register("model", model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, **settings)
    if settings["momentum"]:
        for name, p in model.named_parameters():
            buf = opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
            set_tensor_name(buf, f"opt.momentum.{name}")
            context.register_buffer(buf)
    return opt


@pytest.fixture(params=DEVICES)
def context(request):
    with Context(MNDevice(request.param)) as ctx:
        yield ctx


@pytest.mark.parametrize("settings", SGD_SETTINGS, ids=lambda s: "-".join(
    f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("kind", ["mse", "xent"])
def test_training_matches_torch_step_by_step(context, tmp_path, kind, settings):
    torch.manual_seed(1)
    model = model_for(kind)
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, **settings)
    opt = _setup(context, model, settings)
    initial = [p.detach().clone() for p in model.parameters()]
    batches = make_batches(kind, 20)
    step = context.compile(make_train_step(model, opt, kind), batches[0],
                           storage.path(tmp_path / "step"))
    # Compiling ran the step for real, on the real tensors: they are as they were.
    for p, before in zip(model.parameters(), initial, strict=True):
        assert torch.equal(p.detach(), before) and p.grad is None
    for batch in batches:
        loss = step(batch)["loss"].item()
        ref_opt.zero_grad()
        ref_loss = loss_for(kind, reference(batch["x"]), batch["y"])
        ref_loss.backward()
        ref_opt.step()
        assert loss == pytest.approx(ref_loss.item(), rel=RTOL, abs=ATOL)
    # Before synchronize the host tensors are untouched; after it, they are trained.
    for p, before in zip(model.parameters(), initial, strict=True):
        assert torch.equal(p.detach(), before)
    context.synchronize()
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)
    if settings["momentum"]:
        for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(opt.state[p]["momentum_buffer"],
                                       ref_opt.state[ref]["momentum_buffer"],
                                       rtol=RTOL, atol=ATOL)


def test_state_is_never_reuploaded(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        torch.manual_seed(0)
        model = mlp()
        opt = _setup(context, model, SGD_SETTINGS[1])
        batches = make_batches("xent", 4)
        step = context.compile(make_train_step(model, opt, "xent"), batches[0],
                               storage.path(tmp_path / "step"))
        assert "updates  'model.0.weight'" in step.program.describe()
        assert set(step.output_specs) == {"loss"}
        batch_bytes = sum(t.numel() * t.element_size() for t in batches[0].values())
        step(batches[0])  # the first call uploads the state
        context.report(clear=True)
        losses = [step(b)["loss"] for b in batches[1:]]
        records = [r for r in context.report().records if r.kind == "call"]
        assert len(records) == 3
        for record in records:
            host = record.bytes["host"]
            # Only the batch goes in (each input's device layout rounds it up to whole LWs).
            assert 0 < host <= 2 * batch_bytes
            assert record.state_bytes == 0
            assert not any(c.command.startswith("HostRead") for c in record.commands)
        loss = losses[-1]
        assert isinstance(loss.item(), float) and loss.cpu().shape == ()


def test_the_compile_cache_sees_a_training_step(tmp_path):
    from mlsdk import CacheOptions

    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        opt = _setup(context, model, SGD_SETTINGS[1])
        batch = make_batches("mse", 1)[0]
        cache = CacheOptions(tmp_path / "cache")
        first = context.compile(make_train_step(model, opt, "mse"), batch,
                                storage.path(tmp_path / "a"), cache_options=cache)
        again = context.compile(make_train_step(model, opt, "mse"), batch,
                                storage.path(tmp_path / "b"), cache_options=cache)
        assert (first.cache_status, again.cache_status) == ("miss", "hit")
        assert again.program.state_writes == first.program.state_writes != {}
        reloaded = context.load_codegen_dir(storage.path(tmp_path / "b"))
        assert reloaded.program.state_writes == first.program.state_writes


# -- bad input ----------------------------------------------------------------------------------


def _compile(context, fn, batch, tmp_path, **kwargs):
    return context.compile(fn, batch, storage.path(tmp_path / "f"), **kwargs)


def test_unregistered_parameters_are_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        before = model.weight.detach().clone()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with pytest.raises(CaptureError, match=r"updates 'model.weight'.*not registered"):
            _compile(context, make_train_step(model, opt, "mse"), make_batches("mse", 1)[0],
                     tmp_path)
        assert torch.equal(model.weight.detach(), before) and model.weight.grad is None


def test_unregistered_momentum_buffers_are_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        context.registry.register("model", model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for p in model.parameters():
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        with pytest.raises(CaptureError, match=r"momentum_buffer.*not registered"):
            _compile(context, make_train_step(model, opt, "mse"), make_batches("mse", 1)[0],
                     tmp_path)


def test_optimizer_state_created_while_tracing_is_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        context.registry.register("model", model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        with pytest.raises(CaptureError, match="created its state while the function was traced"):
            _compile(context, make_train_step(model, opt, "mse"), make_batches("mse", 1)[0],
                     tmp_path)
        assert len(opt.state) == 0  # put back as it was


def test_accumulating_into_an_existing_grad_is_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        context.registry.register("model", model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.grad = torch.ones_like(p)

        def no_zero_grad(d):
            loss = F.mse_loss(model(d["x"]), d["y"])
            loss.backward()
            opt.step()
            return {"loss": loss}

        grad = r"accumulates into model\.(weight|bias)\.grad.*zero_grad"
        with pytest.raises(CaptureError, match=grad):
            _compile(context, no_zero_grad, make_batches("mse", 1)[0], tmp_path)
        assert torch.equal(model.weight.grad, torch.ones_like(model.weight))


def test_zero_grad_without_set_to_none_trains_too(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        reference = copy.deepcopy(model)
        context.registry.register("model", model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)

        def step(d):
            opt.zero_grad(set_to_none=False)
            loss = F.mse_loss(model(d["x"]), d["y"])
            loss.backward()
            opt.step()
            return {"loss": loss}

        batch = make_batches("mse", 1)[0]
        _compile(context, step, batch, tmp_path)(batch)
        context.synchronize()
        ref = torch.optim.SGD(reference.parameters(), lr=0.1)
        F.mse_loss(reference(batch["x"]), batch["y"]).backward()
        ref.step()
        torch.testing.assert_close(model.weight.detach(), reference.weight.detach(),
                                   rtol=RTOL, atol=ATOL)


def test_backward_on_a_non_scalar_is_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        context.registry.register("model", model)

        def step(d):
            out = model(d["x"])
            out.backward()
            return {"out": out}

        with pytest.raises(CaptureError, match=r"backward\(\) was called on a tensor that is not"):
            _compile(context, step, {"x": torch.randn(8, 6)}, tmp_path)


def test_training_flag(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        opt = _setup(context, model, SGD_SETTINGS[0])
        batch = make_batches("mse", 1)[0]
        step = make_train_step(model, opt, "mse")
        with pytest.raises(CaptureError, match=r"training=False\), but the function calls"):
            _compile(context, step, batch, tmp_path, training=False)
        assert model.weight.grad is None
        assert _compile(context, step, batch, tmp_path, training=True).program.state_writes
        with pytest.raises(CaptureError, match="updates no registered tensor"):
            _compile(context, lambda d: {"y": model(d["x"])}, {"x": batch["x"]}, tmp_path,
                     training=True)
        with pytest.raises(TypeError, match="training must be None, True or False"):
            _compile(context, step, batch, tmp_path, training="yes")


def test_optimizer_parameter_list_changed(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Linear(6, 4)
        opt = _setup(context, model, SGD_SETTINGS[0])
        batch = make_batches("mse", 1)[0]
        step = _compile(context, make_train_step(model, opt, "mse"), batch, tmp_path)
        step(batch)
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))]})
        with pytest.raises(OptimizerChangedError, match="'opt'.*1 param group.*has 2 now"):
            step(batch)
        opt.param_groups.pop()
        step(batch)
        opt.param_groups[0]["params"] = [model.weight]
        with pytest.raises(OptimizerChangedError, match="param group 0 held 2"):
            step(batch)


def test_dropout_in_train_mode_is_a_clear_error(tmp_path):
    with Context(MNDevice("mncore2:auto")) as context:
        model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Dropout(0.5))
        opt = _setup(context, model, SGD_SETTINGS[0])
        batch = make_batches("mse", 1)[0]
        with pytest.raises(UnsupportedOperationError, match="draws random numbers.*eval"):
            _compile(context, make_train_step(model, opt, "mse"), batch, tmp_path)
        model.eval()  # Dropout is the identity in eval mode, as in torch
        assert _compile(context, make_train_step(model, opt, "mse"), batch, tmp_path)(batch)
