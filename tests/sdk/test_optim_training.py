"""The MN-Core optimizers as part of a compiled training step, against torch.optim.

A linear model (MSE) and a two-layer MLP (cross-entropy, int64 labels) are trained 20 steps on
``mncore2:auto`` and ``pfvm:cpu`` with ``MNCoreSGD`` / ``MNCoreAdam`` / ``MNCoreAdamW`` compiled
into the step, and with the ``torch.optim`` optimizer of the same settings (``foreach=False``)
in plain torch. Every loss, the final parameters and the synchronized ``state_dict()`` agree
within ``rtol=1e-5, atol=1e-6`` (float32; see ``docs/optim.md``, "On the device").
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from mlsdk import (
    CacheOptions,
    Context,
    MNCoreAdam,
    MNCoreAdamW,
    MNCoreSGD,
    MNDevice,
    set_buffer_name_in_optimizer,
    storage,
)
from mlsdk.optim import optimizer_buffers
from mlsdk.testing.training import loss_for, make_batches, make_train_step, model_for
from mncore_hdl.arch import LW_BYTES

RTOL, ATOL = 1e-5, 1e-6
DEVICES = ["mncore2:auto", "pfvm:cpu"]
STEPS = 20

# name: (MN-Core class, torch class, settings)
CASES: dict[str, tuple[type, type, dict[str, Any]]] = {
    "sgd": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1}),
    "sgd-wd": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.05}),
    "sgd-momentum": (MNCoreSGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-momentum-wd-nesterov": (MNCoreSGD, torch.optim.SGD,
                                 {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01,
                                  "nesterov": True}),
    "sgd-momentum-dampening-wd": (MNCoreSGD, torch.optim.SGD,
                                  {"lr": 0.1, "momentum": 0.8, "dampening": 0.3,
                                   "weight_decay": 0.01}),
    "sgd-momentum-maximize": (MNCoreSGD, torch.optim.SGD,
                              {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    "adam": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2}),
    "adam-beta1-0": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2, "betas": (0.0, 0.99)}),
    "adam-wd": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.01}),
    "adam-wd-amsgrad": (MNCoreAdam, torch.optim.Adam,
                        {"lr": 1e-2, "weight_decay": 0.01, "amsgrad": True}),
    "adam-amsgrad": (MNCoreAdam, torch.optim.Adam, {"lr": 1e-2, "amsgrad": True}),
    "adamw": (MNCoreAdamW, torch.optim.AdamW, {"lr": 1e-2}),
    "adamw-wd0": (MNCoreAdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.0}),
    "adamw-amsgrad": (MNCoreAdamW, torch.optim.AdamW,
                      {"lr": 1e-2, "weight_decay": 0.1, "amsgrad": True}),
}


def _setup(context: Context, kind: str, case: str):
    """The model and its MN-Core optimizer, registered; the torch reference and its optimizer."""
    ours, theirs, settings = CASES[case]
    torch.manual_seed(1)
    model = model_for(kind)
    reference = copy.deepcopy(model)
    context.registry.register("model", model)
    opt = ours(model.parameters(), foreach=False, **settings)
    set_buffer_name_in_optimizer(opt, "opt")
    context.register_optimizer_buffers(opt)
    ref_opt = theirs(reference.parameters(), foreach=False, **settings)
    return model, opt, reference, ref_opt


def _buffers(opt) -> list[torch.Tensor]:
    return [tensor for _, tensor in optimizer_buffers(opt)]


def _torch_step(kind, reference, ref_opt, batch) -> float:
    ref_opt.zero_grad()
    loss = loss_for(kind, reference(batch["x"]), batch["y"])
    loss.backward()
    ref_opt.step()
    return loss.item()


def assert_state_dicts_match(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Tensors within the tolerance, everything else equal."""
    assert got["param_groups"] == want["param_groups"]
    assert got["state"].keys() == want["state"].keys()
    for index, state in want["state"].items():
        assert got["state"][index].keys() == state.keys(), index
        for key, value in state.items():
            mine = got["state"][index][key]
            if isinstance(value, torch.Tensor):
                assert isinstance(mine, torch.Tensor) and mine.dtype == value.dtype, (index, key)
                torch.testing.assert_close(mine, value, rtol=RTOL, atol=ATOL)
            else:
                assert mine == value, (index, key)


@pytest.fixture(params=DEVICES)
def context(request):
    with Context(MNDevice(request.param)) as ctx:
        yield ctx


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", ["mse", "xent"])
def test_compiled_optimizer_matches_torch_step_by_step(context, tmp_path, kind, case):
    model, opt, reference, ref_opt = _setup(context, kind, case)
    initial = [p.detach().clone() for p in model.parameters()]
    initial_state = opt.state_dict()
    buffers = [t.clone() for t in _buffers(opt)]
    batches = make_batches(kind, STEPS)
    step = context.compile(make_train_step(model, opt, kind), batches[0],
                           storage.path(tmp_path / "step"))
    # Compiling ran the step for real; every tensor is put back, the hidden ones included
    # (lr tensors, SGD's momentum_started flags): it took no step.
    assert opt.state_dict() == initial_state
    assert all(torch.equal(t, before) for t, before in zip(_buffers(opt), buffers, strict=True))
    for i, batch in enumerate(batches):
        loss = step(batch)["loss"].item()
        want = _torch_step(kind, reference, ref_opt, batch)
        assert loss == pytest.approx(want, rel=RTOL, abs=ATOL), f"step {i}"
    # Before synchronize the host parameters and state are untouched.
    for p, before in zip(model.parameters(), initial, strict=True):
        assert torch.equal(p.detach(), before)
    assert opt.state_dict() == initial_state
    assert all(torch.equal(t, before) for t, before in zip(_buffers(opt), buffers, strict=True))
    context.synchronize()
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)
    assert_state_dicts_match(opt.state_dict(), ref_opt.state_dict())


def _records_of_call(context: Context, compiled, batch) -> tuple[Any, list]:
    context.report(clear=True)
    out = compiled(batch)
    return out, context.report().records


@pytest.mark.parametrize("case", ["sgd-momentum-dampening-wd", "adam-wd-amsgrad", "adamw"])
def test_report_per_step_and_learning_rate_changes(context, tmp_path, case):
    """lr set by hand and by StepLR reaches the device with no recompile: one HostWrite of the
    lr (4 bytes, one 8-byte DRAM long word) as the only state bytes of the call after a change,
    none otherwise; only the batch goes in, nothing comes out unasked."""
    kind = "xent"
    model, opt, reference, ref_opt = _setup(context, kind, case)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    ref_scheduler = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=3, gamma=0.5)
    batches = make_batches(kind, 24)
    step = context.compile(make_train_step(model, opt, kind), batches[0],
                           storage.path(tmp_path / "step"))
    program = step.program
    on_device = context.device.name.startswith("mncore2")
    batch_bytes = sum(t.numel() * t.element_size() for t in batches[0].values())
    step(batches[0])  # the first call uploads the state
    _torch_step(kind, reference, ref_opt, batches[0])
    losses = []
    for i, batch in enumerate(batches[1:], start=1):
        changed = False
        if i == 10:  # by hand, on top of the schedule
            opt.param_groups[0]["lr"] *= 0.3
            ref_opt.param_groups[0]["lr"] *= 0.3
            changed = True
        elif i > 1 and (i - 1) % 3 == 0:  # StepLR's gamma applies from this call on
            changed = True
        out, records = _records_of_call(context, step, batch)
        assert step.program is program  # no recompile
        calls = [r for r in records if r.kind == "call"]
        loads = [r for r in records if r.kind != "call"]
        assert len(calls) == 1
        call = calls[0]
        assert call.state_bytes == 0
        assert not any(c.command.startswith("HostRead") for c in call.commands)
        if on_device:  # pfvm:cpu runs on the host tensors: no transfers at all
            assert 0 < call.bytes["host"] <= 2 * batch_bytes  # the batch, in whole LWs
        if on_device and changed:
            assert [r.function for r in loads] == ["registry opt.group0.lr"], i
            # the 4-byte float32 lr, in one DRAM long word
            assert sum(r.state_bytes for r in loads) == LW_BYTES
            assert [c.command for c in loads[0].commands] == [
                c.command for c in loads[0].commands if c.command.startswith("HostWrite")]
            assert len(loads[0].commands) == 1
        else:
            assert sum(r.state_bytes for r in records) == 0, i
        losses.append(out["loss"])
        want = _torch_step(kind, reference, ref_opt, batch)
        assert losses[-1].item() == pytest.approx(want, rel=RTOL, abs=ATOL), f"step {i}"
        scheduler.step()
        ref_scheduler.step()
    assert opt.param_groups[0]["lr"] == ref_opt.param_groups[0]["lr"]
    context.synchronize()
    for p, ref in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)
    assert_state_dicts_match(opt.state_dict(), ref_opt.state_dict())


def test_compile_cache_hit_trains_identically(tmp_path):
    def train(cache_dir, outdir):
        with Context(MNDevice("mncore2:auto")) as context:
            model, opt, _, _ = _setup(context, "xent", "adam-wd-amsgrad")
            batches = make_batches("xent", 5)
            step = context.compile(make_train_step(model, opt, "xent"), batches[0],
                                   storage.path(outdir), cache_options=CacheOptions(cache_dir))
            losses = [step(b)["loss"].item() for b in batches]
            context.synchronize()
            return step.cache_status, losses, [p.detach().clone() for p in model.parameters()]

    first, first_losses, first_params = train(tmp_path / "cache", tmp_path / "a")
    again, losses, params = train(tmp_path / "cache", tmp_path / "b")
    assert (first, again) == ("miss", "hit")
    assert losses == first_losses
    for got, want in zip(params, first_params, strict=True):
        assert torch.equal(got, want)


def test_sgd_positional_and_keyword_construction():
    model = torch.nn.Linear(3, 2)
    positional = MNCoreSGD(model.parameters(), 0.1, 0.9, 0.2, weight_decay=1e-3, nesterov=False)
    keyword = MNCoreSGD(params=model.parameters(), lr=0.1, momentum=0.9, dampening=0.2,
                        weight_decay=1e-3, nesterov=False)
    want = torch.optim.SGD(model.parameters(), 0.1, 0.9, 0.2, weight_decay=1e-3)
    assert positional.param_groups[0].keys() == want.param_groups[0].keys()
    for opt in (positional, keyword):
        group = opt.param_groups[0]
        for key, value in want.param_groups[0].items():
            if key != "params":
                assert group[key] == value, key
    nesterov = MNCoreSGD(model.parameters(), 0.1, 0.9, 0, 0, True)
    assert nesterov.param_groups[0]["nesterov"] is True
