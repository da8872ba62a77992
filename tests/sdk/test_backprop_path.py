"""MLSDK's two training paths of run_timm.py, with a small torch.nn CNN (timm itself is not
installed here): the backprop path (``registry.register(name, optimizer)``,
``optimizers=[...]``, ``options={"backprop": True}``, learning rate / global step / grad scale
fed as inputs) and the FX2ONNX path (``export_kwargs={"use_fx2onnx": True}``, parameters and
optimizer buffers registered, BatchNorm statistics left unregistered)."""

from __future__ import annotations

import copy

import pytest
import torch
from mlsdk import (
    Context,
    MNCoreSGD,
    MNDevice,
    set_buffer_name_in_optimizer,
    set_tensor_name,
    set_tensor_name_in_module,
    storage,
)
from mncore_compiler.errors import CaptureError
from torch import nn

STEPS = 4


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10)).train()


def _sample() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {"images": torch.randn(2, 3, 8, 8), "labels": torch.tensor([3, 7])}


@pytest.fixture(params=["mncore2:auto", "pfvm:cpu"])
def context(request):
    with Context(MNDevice(request.param)) as ctx:
        yield ctx


def _eager_backprop(model: nn.Module, sample, steps: int, lr: float = 0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(sample["images"]), sample["labels"])
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def test_the_backprop_path_trains_as_torch_does(context, tmp_path):
    model, reference = _cnn(), _cnn()
    context.registry.register("model0", model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    names = context.registry.register("optimizer0", optimizer)
    assert any(n.endswith("momentum_buffer") for n in names)
    loss_fn = nn.CrossEntropyLoss()

    def f(inputs):
        return {"loss": loss_fn(model(inputs["images"]), inputs["labels"])}

    step = context.compile(f, _sample(), storage.path(tmp_path / "bp"), optimizers=[optimizer],
                           options={"backprop": True})
    assert {"optimizer0@0@mncore_learning_rate", "optimizer0@0@mncore_global_step",
            "mncore_grad_scale_factor", "images", "labels"} == set(step.input_specs)
    losses = []
    for global_step in range(STEPS):
        inputs = _sample()
        inputs["optimizer0@0@mncore_learning_rate"] = torch.tensor(0.1)
        inputs["optimizer0@0@mncore_global_step"] = torch.tensor(global_step)
        inputs["mncore_grad_scale_factor"] = torch.tensor(1)
        losses.append(step(inputs)["loss"].cpu())
    context.synchronize()
    want = _eager_backprop(reference, _sample(), STEPS)
    torch.testing.assert_close(torch.stack(losses), torch.stack(want), rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    # Registered with the module, the BatchNorm statistics follow torch too.
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    assert int(model[1].num_batches_tracked) == STEPS


def test_the_learning_rate_input_is_the_one_used(context, tmp_path):
    model = _cnn()
    before = [p.detach().clone() for p in model.parameters()]
    context.registry.register("m", model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    context.registry.register("opt", optimizer)
    loss_fn = nn.CrossEntropyLoss()
    step = context.compile(lambda d: {"loss": loss_fn(model(d["images"]), d["labels"])},
                           _sample(), storage.path(tmp_path / "lr"), optimizers=[optimizer],
                           options={"backprop": True})
    inputs = {**_sample(), "opt@0@mncore_learning_rate": torch.tensor(0.0),
              "opt@0@mncore_global_step": torch.tensor(0),
              "mncore_grad_scale_factor": torch.tensor(4)}
    step(inputs)
    context.synchronize()
    for p, q in zip(model.parameters(), before, strict=True):  # lr 0: nothing moves
        torch.testing.assert_close(p.detach(), q)


def test_backprop_errors_are_clear(context, tmp_path):
    model = _cnn()
    context.registry.register("m", model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def f(d):
        return {"loss": model(d["images"]).sum()}

    with pytest.raises(Exception, match=r"not registered in this Context.*register"):
        context.compile(f, _sample(), storage.path(tmp_path / "a"), optimizers=[optimizer],
                        options={"backprop": True})
    with pytest.raises(TypeError, match=r"needs optimizers=\[\.\.\.\]"):
        context.compile(f, _sample(), storage.path(tmp_path / "b"), options={"backprop": True})
    with pytest.raises(ValueError, match=r"optimizers=\[\.\.\.\] goes with options="):
        context.compile(f, _sample(), storage.path(tmp_path / "c"), optimizers=[optimizer])
    with pytest.raises(TypeError, match="'backprop' must be a bool"):
        context.compile(f, _sample(), storage.path(tmp_path / "d"), options={"backprop": 1})
    with pytest.raises(TypeError, match=r"takes a torch.optim SGD, Adam or AdamW.*RMSprop"):
        context.registry.register("o", torch.optim.RMSprop(model.parameters()))


def test_export_kwargs(context, tmp_path):
    def double(d):
        return {"y": d["x"] * 2}

    x = {"x": torch.ones(4)}
    for value in (True, False):
        f = context.compile(double, x, storage.path(tmp_path / f"e{value}"),
                            export_kwargs={"use_fx2onnx": value})
        torch.testing.assert_close(f(x)["y"].cpu(), torch.full((4,), 2.0))
    with pytest.raises(ValueError, match=r"Unknown export_kwargs key 'opset'.*use_fx2onnx"):
        context.compile(double, x, storage.path(tmp_path / "bad"), export_kwargs={"opset": 17})
    with pytest.raises(TypeError, match=r"export_kwargs\['use_fx2onnx'\] must be a bool"):
        context.compile(double, x, storage.path(tmp_path / "bad"),
                        export_kwargs={"use_fx2onnx": "yes"})


def _fx2onnx_step(context, model, tmp_path):
    set_tensor_name_in_module(model, "model0")
    for p in model.parameters():
        context.register_param(p)
    optimizer = MNCoreSGD(model.parameters(), 0.1, 0.9, 0.0)
    set_buffer_name_in_optimizer(optimizer, "optimizer0")
    context.register_optimizer_buffers(optimizer)
    loss_fn = nn.CrossEntropyLoss()

    def train_step(inputs):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs["images"]), inputs["labels"])
        loss.backward()
        optimizer.step()
        return {"loss": loss}

    return context.compile(train_step, _sample(), storage.path(tmp_path / "fx"),
                           export_kwargs={"use_fx2onnx": True})


def test_the_fx2onnx_path_keeps_batchnorm_statistics_on_the_device(context, tmp_path):
    model = _cnn()
    reference = copy.deepcopy(model)
    step = _fx2onnx_step(context, model, tmp_path)
    assert {"model0.1.running_mean", "model0.1.running_var",
            "model0.1.num_batches_tracked"} <= set(context.registry)
    losses = [step(_sample())["loss"].cpu() for _ in range(STEPS)]
    # On the device, updated in place: the host tensors change only at synchronize().
    assert int(model[1].num_batches_tracked) == 0
    context.synchronize()
    want = _eager_backprop(reference, _sample(), STEPS)
    torch.testing.assert_close(torch.stack(losses), torch.stack(want), rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean,
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model[1].running_var, reference[1].running_var,
                               rtol=1e-5, atol=1e-6)
    assert int(model[1].num_batches_tracked) == int(reference[1].num_batches_tracked) == STEPS
    # An eval() inference compiled afterwards reads the trained statistics.
    model.eval()
    reference.eval()
    infer = context.compile(lambda d: {"out": model(d["images"])}, {"images": _sample()["images"]},
                            storage.path(tmp_path / "infer"))
    torch.testing.assert_close(infer({"images": _sample()["images"]})["out"].cpu(),
                               reference(_sample()["images"]).detach(), rtol=1e-4, atol=1e-5)


def test_statistics_without_names_take_the_parameters_prefix(context, tmp_path):
    model = _cnn()
    reference = copy.deepcopy(model)
    for path, p in model.named_parameters():
        set_tensor_name(p, f"net.{path}")
        context.register_param(p)
    optimizer = MNCoreSGD(model.parameters(), 0.1)
    set_buffer_name_in_optimizer(optimizer, "opt")
    context.register_optimizer_buffers(optimizer)
    loss_fn = nn.CrossEntropyLoss()

    def train_step(inputs):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs["images"]), inputs["labels"])
        loss.backward()
        optimizer.step()
        return {"loss": loss}

    step = context.compile(train_step, _sample(), storage.path(tmp_path / "s"))
    assert {"net.1.running_mean", "net.1.running_var", "net.1.num_batches_tracked"} <= set(
        context.registry)
    for _ in range(2):
        step(_sample())
    context.synchronize()
    eager = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        eager.zero_grad()
        loss_fn(reference(_sample()["images"]), _sample()["labels"]).backward()
        eager.step()
    torch.testing.assert_close(model[1].running_var, reference[1].running_var,
                               rtol=1e-5, atol=1e-6)


def test_inference_and_unregistered_models_are_left_alone(context, tmp_path):
    model = _cnn()
    set_tensor_name_in_module(model, "model0")
    for p in model.parameters():
        context.register_param(p)
    # training=False: a train()-mode BatchNorm is still the error that says to call eval().
    with pytest.raises(CaptureError, match=r"not registered state"):
        context.compile(lambda d: {"y": model(d["images"])}, {"images": _sample()["images"]},
                        storage.path(tmp_path / "i"), training=False)
    assert "model0.1.running_mean" not in context.registry
    # A model none of whose parameters is registered keeps its statistics as constants.
    other = _cnn()
    with pytest.raises(CaptureError, match=r"not registered state"):
        context.compile(lambda d: {"y": other(d["images"])}, {"images": _sample()["images"]},
                        storage.path(tmp_path / "o"))


def test_the_backprop_path_with_adam_follows_torch(context, tmp_path):
    model, reference = _cnn(), _cnn()
    context.registry.register("model0", model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    context.registry.register("optimizer0", optimizer)
    loss_fn = nn.CrossEntropyLoss()
    step = context.compile(lambda d: {"loss": loss_fn(model(d["images"]), d["labels"])},
                           _sample(), storage.path(tmp_path / "adam"), optimizers=[optimizer],
                           options={"backprop": True})
    losses = []
    for global_step in range(STEPS):
        inputs = {**_sample(), "optimizer0@0@mncore_learning_rate": torch.tensor(0.01),
                  "optimizer0@0@mncore_global_step": torch.tensor(global_step),
                  "mncore_grad_scale_factor": torch.tensor(2)}
        losses.append(step(inputs)["loss"].cpu())
    context.synchronize()
    eager = torch.optim.Adam(reference.parameters(), lr=0.01)
    want = []
    for _ in range(STEPS):
        eager.zero_grad()
        loss = loss_fn(reference(_sample()["images"]), _sample()["labels"])
        loss.backward()
        eager.step()
        want.append(loss.detach())
    torch.testing.assert_close(torch.stack(losses), torch.stack(want), rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
