"""MNCoreSGD / MNCoreAdam / MNCoreAdamW against torch.optim, their naming and registration,
and learning-rate changes reaching the device (Registry.before_call)."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from mlsdk import (
    Context,
    MNCoreAdam,
    MNCoreAdamW,
    MNCoreSGD,
    MNDevice,
    RegistrationError,
    get_tensor_name,
    set_buffer_name_in_optimizer,
    storage,
)
from mlsdk.optim import one_minus_pow
from mlsdk.testing.examples import run_example
from mncore_hdl.paths import repo_root

ROOT = repo_root()
# Same gradients every step: the only difference left is rounding. Torch fuses ``p - lr * g``
# (and lerp, addcmul, add with alpha) into one fma; these steps round the product apart, and
# Adam's bias corrections come from the step tensor in float32. Observed: <= 1e-7 after 25
# steps on parameters of magnitude ~0.3 (docs/optim.md).
TOL = {"rtol": 1e-5, "atol": 1e-6}
STEPS = 25

CASES = {
    "sgd": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1}),
    "sgd-momentum": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-momentum-dampening-wd": (MNCoreSGD, torch.optim.SGD,
                                  {"lr": 0.1, "momentum": 0.9, "dampening": 0.3,
                                   "weight_decay": 1e-2}),
    "sgd-nesterov-wd": (MNCoreSGD, torch.optim.SGD,
                        {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-3}),
    "sgd-maximize": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    "adam": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2}),
    "adam-wd-amsgrad": (MNCoreAdam, torch.optim.Adam,
                        {"lr": 1e-2, "weight_decay": 1e-2, "amsgrad": True}),
    "adam-beta1-0": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2, "betas": (0.0, 0.99)}),
    "adamw": (MNCoreAdamW, torch.optim.AdamW, {"lr": 1e-2}),
    "adamw-amsgrad": (MNCoreAdamW, torch.optim.AdamW,
                      {"lr": 3e-3, "weight_decay": 0.1, "amsgrad": True}),
}


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _pair(case: str, seed: int = 0):
    ours_cls, torch_cls, kwargs = CASES[case]
    model = _mlp(seed)
    reference = copy.deepcopy(model)
    return (model, ours_cls(model.parameters(), foreach=False, **kwargs),
            reference, torch_cls(reference.parameters(), foreach=False, **kwargs))


def _backward(model: torch.nn.Module, optimizer, x, y) -> torch.Tensor:
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss


def _train(model, optimizer, reference, torch_opt, steps: int = STEPS, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x = torch.randn(6, 8, generator=gen)
        y = torch.randint(0, 4, (6,), generator=gen)
        _backward(reference, torch_opt, x, y)
        _backward(model, optimizer, x, y)
        for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
            ours.grad = theirs.grad.clone()  # the same gradients: compare the updates alone
        optimizer.step()
        torch_opt.step()
        for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(ours, theirs, **TOL, msg=lambda m, s=step: f"step {s}: {m}")


def _assert_state_dicts_equal(ours: dict, theirs: dict) -> None:
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for index, state in theirs["state"].items():
        assert state.keys() == ours["state"][index].keys(), index
        for key, value in state.items():
            assert ours["state"][index][key].dtype == value.dtype, (index, key)
            torch.testing.assert_close(ours["state"][index][key], value, **TOL)


# -- the update rules ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_steps_match_torch_step_by_step(case):
    _train(*_pair(case))


@pytest.mark.parametrize("case", list(CASES))
def test_state_dict_equals_torch(case):
    model, optimizer, reference, torch_opt = _pair(case)
    _assert_state_dicts_equal(optimizer.state_dict(), torch_opt.state_dict())  # before any step
    _train(model, optimizer, reference, torch_opt, steps=3)
    _assert_state_dicts_equal(optimizer.state_dict(), torch_opt.state_dict())


def test_state_exists_from_construction():
    model = _mlp()
    sgd = MNCoreSGD(model.parameters(), 0.1, 0.9)
    adam = MNCoreAdam(model.parameters(), amsgrad=True)
    for p in model.parameters():
        assert torch.equal(sgd.state[p]["momentum_buffer"], torch.zeros_like(p))
        assert adam.state[p]["step"].dtype == torch.float32 and adam.state[p]["step"].dim() == 0
        assert set(adam.state[p]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert MNCoreSGD(model.parameters(), 0.1).state == {}, "no momentum, no state (as torch)"


def test_positional_and_keyword_arguments_like_torch():
    params = list(_mlp().parameters())
    positional = MNCoreSGD(params, 0.1, 0.9, 0.1, 1e-4, False)
    keyword = torch.optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-4)
    assert positional.param_groups[0].keys() == keyword.param_groups[0].keys()
    assert {k: v for k, v in positional.param_groups[0].items() if k != "params"} == {
        k: v for k, v in keyword.param_groups[0].items() if k != "params"}
    assert isinstance(positional, torch.optim.SGD)
    assert isinstance(MNCoreAdamW(params), torch.optim.AdamW)
    assert MNCoreAdamW(params).param_groups[0]["weight_decay"] == 1e-2


@pytest.mark.parametrize("call, error, match", [
    (lambda p: MNCoreSGD(p, torch.tensor(0.1)), TypeError, "Python float"),
    (lambda p: MNCoreSGD(p, -1.0), ValueError, "Invalid learning rate"),
    (lambda p: MNCoreSGD(p, 0.1, nesterov=True), ValueError, "Nesterov"),
    (lambda p: MNCoreAdam(p, fused=True), ValueError, "fused=True"),
    (lambda p: MNCoreAdam(p, betas=(torch.tensor(0.9), torch.tensor(0.9))), TypeError, "betas"),
    (lambda p: MNCoreAdamW(p, decoupled_weight_decay=False), TypeError, "decouples"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(list(_mlp().parameters()))


def test_one_minus_pow_is_accurate():
    steps = torch.arange(1, 2001, dtype=torch.float32)
    for beta in (0.9, 0.99, 0.999, 0.9999):
        exact = 1 - torch.tensor(beta, dtype=torch.float64) ** steps.double()
        torch.testing.assert_close(one_minus_pow(beta, steps).double(), exact,
                                   rtol=1e-6, atol=0)


def test_sgd_dampening_first_step_sets_the_buffer_to_the_gradient():
    p = torch.nn.Parameter(torch.ones(3))
    optimizer = MNCoreSGD([p], 0.1, momentum=0.9, dampening=0.5)
    p.grad = torch.tensor([1.0, 2.0, 3.0])
    optimizer.step()
    assert torch.equal(optimizer.state[p]["momentum_buffer"], p.grad)
    optimizer.step()
    assert torch.equal(optimizer.state[p]["momentum_buffer"], p.grad * 0.9 + p.grad * 0.5)


# -- state_dict round trips, lr changes ---------------------------------------------------------


@pytest.mark.parametrize("case", ["sgd-momentum-dampening-wd", "adam-wd-amsgrad", "adamw"])
def test_load_state_dict_and_torch_save_round_trip(case):
    model, optimizer, reference, torch_opt = _pair(case)
    _train(model, optimizer, reference, torch_opt, steps=4)
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer)
    # Into a fresh MNCore optimizer over a copy of the model, then both keep training alike.
    clone = copy.deepcopy(model)
    ours_cls, _, kwargs = CASES[case]
    restored = ours_cls(clone.parameters(), **kwargs)
    tensors = {id(t) for s in restored.state.values() for t in s.values()}
    restored.load_state_dict(saved)
    assert {id(t) for s in restored.state.values() for t in s.values()} == tensors, \
        "loading keeps the optimizer's own state tensors (their names and registrations)"
    _assert_state_dicts_equal(restored.state_dict(), optimizer.state_dict())
    _train(clone, restored, reference, torch_opt, steps=4, seed=7)
    # A torch optimizer's state dict loads too, and ours loads into torch's.
    torch_opt.load_state_dict(restored.state_dict())
    restored.load_state_dict(torch_opt.state_dict())


def test_loading_an_empty_state_restarts_from_zeros():
    model, optimizer, reference, torch_opt = _pair("sgd-momentum-dampening-wd")
    fresh = torch.optim.SGD(reference.parameters(), **CASES["sgd-momentum-dampening-wd"][2])
    _train(model, optimizer, reference, torch_opt, steps=2)
    optimizer.load_state_dict(fresh.state_dict())
    assert optimizer.state_dict()["state"] == {}
    assert all(torch.count_nonzero(s["momentum_buffer"]) == 0 for s in optimizer.state.values())


@pytest.mark.parametrize("case", ["sgd-momentum", "adamw"])
def test_a_learning_rate_change_takes_effect(case):
    model, optimizer, reference, torch_opt = _pair(case)
    _train(model, optimizer, reference, torch_opt, steps=2)
    for group in (*optimizer.param_groups, *torch_opt.param_groups):
        group["lr"] = group["lr"] * 0.1
    _train(model, optimizer, reference, torch_opt, steps=3, seed=3)
    assert optimizer.lr_tensors[0].item() == pytest.approx(CASES[case][2]["lr"] * 0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    torch_scheduler = torch.optim.lr_scheduler.StepLR(torch_opt, step_size=1, gamma=0.5)
    _train(model, optimizer, reference, torch_opt, steps=1, seed=4)
    scheduler.step()
    torch_scheduler.step()
    _train(model, optimizer, reference, torch_opt, steps=2, seed=5)


def test_zero_grad_sets_grads_to_none():
    model, optimizer, *_ = _pair("adam")
    _backward(model, optimizer, torch.randn(2, 8), torch.tensor([0, 1]))
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# -- names and registration ---------------------------------------------------------------------


def test_buffer_names_use_parameter_names_and_indices():
    model = _mlp()
    optimizer = MNCoreSGD(model.parameters(), 0.1, momentum=0.9, dampening=0.1)
    set_buffer_name_in_optimizer(optimizer, "opt")
    assert get_tensor_name(optimizer.state[model[0].weight]["momentum_buffer"]) == \
        "opt.param0.momentum_buffer"
    assert get_tensor_name(optimizer.lr_tensors[0]) == "opt.group0.lr"
    with Context(MNDevice("pfvm:cpu")) as context:
        context.registry.register("net", model)
        adam = MNCoreAdam(model.parameters())
        set_buffer_name_in_optimizer(adam, "adam")
        names = context.register_optimizer_buffers(adam)
    assert "adam.net.0.weight.exp_avg_sq" in names and "adam.net.2.bias.step" in names
    assert "adam.group0.lr" in names
    assert len(names) == 3 * 4 + 1


def test_register_optimizer_buffers_errors():
    model = _mlp()
    with Context(MNDevice("pfvm:cpu")) as context:
        optimizer = MNCoreAdam(model.parameters())
        set_buffer_name_in_optimizer(optimizer, "opt")
        with pytest.raises(RegistrationError, match=r"parameter #0 .*not registered"):
            context.register_optimizer_buffers(optimizer)
        context.registry.register("net", model)
        unnamed = MNCoreAdam(model.parameters())
        with pytest.raises(RegistrationError, match="set_buffer_name_in_optimizer"):
            context.register_optimizer_buffers(unnamed)
        assert len(context.registry) == 4, "nothing of the optimizer was registered"
        other = torch.nn.Linear(3, 3)
        with pytest.raises(RegistrationError, match="not registered"):
            context.register_optimizer_buffers(MNCoreSGD([*model.parameters(),
                                                          *other.parameters()], 0.1))
        set_buffer_name_in_optimizer(unnamed, "opt")  # the same names as `optimizer`'s
        context.register_optimizer_buffers(optimizer)
        with pytest.raises(RegistrationError, match="already registered under the name"):
            context.register_optimizer_buffers(unnamed)
        with pytest.raises(ValueError, match="non-empty str"):
            set_buffer_name_in_optimizer(optimizer, "")


def test_a_torch_optimizer_registers_the_state_it_has():
    model = _mlp()
    optimizer = torch.optim.Adam(model.parameters())
    with Context(MNDevice("pfvm:cpu")) as context:
        context.registry.register("net", model)
        set_buffer_name_in_optimizer(optimizer, "opt")
        assert context.register_optimizer_buffers(optimizer) == [], "torch: no state yet"
        _backward(model, optimizer, torch.randn(2, 8), torch.tensor([0, 1]))
        optimizer.step()
        set_buffer_name_in_optimizer(optimizer, "opt")
        assert len(context.register_optimizer_buffers(optimizer)) == 3 * 4


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_changed_lr_is_uploaded_before_a_call(device, tmp_path):
    model = torch.nn.Linear(8, 4)
    optimizer = MNCoreSGD(model.parameters(), 0.1, momentum=0.9)
    with Context(MNDevice(device)) as context:
        context.registry.register("net", model)
        set_buffer_name_in_optimizer(optimizer, "opt")
        context.register_optimizer_buffers(optimizer)
        lr = context.get_registered_value_proxy(optimizer.lr_tensors[0])
        assert lr.cpu().item() == pytest.approx(0.1)
        infer = context.compile(lambda d: {"y": model(d["x"])}, {"x": torch.randn(2, 8)},
                                storage.path(str(tmp_path / "infer")))
        infer({"x": torch.randn(2, 8)})
        context.report(clear=True)
        infer({"x": torch.randn(2, 8)})  # lr unchanged: no state moves
        assert sum(r.state_bytes for r in context.report(clear=True).records) == 0
        optimizer.param_groups[0]["lr"] = 0.025
        assert lr.cpu().item() == pytest.approx(0.1), "not before a call"
        infer({"x": torch.randn(2, 8)})
        assert lr.cpu().item() == pytest.approx(0.025)
        assert context.get_registered_value_proxy(optimizer.lr_tensors[0]).cpu().item() == \
            pytest.approx(0.025)
        if device != "pfvm:cpu":
            records = context.report().records
            assert any(r.state_bytes > 0 and "opt.group0.lr" in r.function for r in records)


# -- the example --------------------------------------------------------------------------------


def test_train_classifier_example_runs(tmp_path):
    run = run_example("train_classifier.py", "--device", "mncore2:auto", "--outdir",
                      str(tmp_path), cwd=tmp_path, timeout=300)
    assert "accuracy" in run.stdout


def test_train_classifier_example_plain_torch_reaches_the_threshold(tmp_path):
    run = run_example("train_classifier.py", "--device", "torch", cwd=tmp_path, timeout=300)
    assert "test accuracy" in run.stdout


def test_bench_training_imports():
    """bench/bench_training.py starts (its imports, the example it borrows) and shows its usage."""
    import os
    import subprocess
    import sys

    from mlsdk.paths import source_roots

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, source_roots()))}
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_training.py"), "--help"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "--optimizer" in run.stdout
