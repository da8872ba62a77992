"""Registered module state: tensor names, the Context's registry, device copies, synchronize."""

from __future__ import annotations

import gc
import json

import pytest
import torch
from mlsdk import (
    Context,
    MNDevice,
    RegistrationError,
    get_tensor_name,
    set_tensor_name,
    set_tensor_name_in_module,
    storage,
)
from mlsdk.errors import StaleTensorError
from mlsdk.testing.examples import run_example
from mncore_hdl.layout import native_layout, to_device
from mncore_hdl.paths import repo_root

ROOT = repo_root()
DEVICES = ["mncore2:auto", "pfvm:cpu"]
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(params=DEVICES)
def ctx(request):
    context = Context(MNDevice(request.param))
    yield context
    context.close()


def _linear(seed: int, n_in: int = 32, n_out: int = 16) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(n_in, n_out)


def _compile(context, fn, path, n_in: int = 32, **kwargs):
    return context.compile(fn, {"x": torch.randn(4, n_in)}, storage.path(path), **kwargs)


def _state_nbytes(model: torch.nn.Module, context) -> int:
    config = context.mndevice.config
    return sum(native_layout(tuple(t.shape), "float32", config).nbytes
               for t in model.state_dict().values())


# -- names --------------------------------------------------------------------------------------


def test_names_are_set_read_and_given_to_a_module():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    assert get_tensor_name(model[0].weight) is None
    set_tensor_name(model[0].weight, "w")
    assert get_tensor_name(model[0].weight) == "w"
    set_tensor_name_in_module(model, "net")
    assert get_tensor_name(model[0].weight) == "net.0.weight"
    assert get_tensor_name(model[1].running_mean) == "net.1.running_mean"
    assert get_tensor_name(model[0].weight.detach()) is None, "a view is another tensor"


def test_a_name_does_not_keep_the_tensor_alive():
    import weakref

    tensor = torch.ones(3)
    set_tensor_name(tensor, "t")
    ref = weakref.ref(tensor)
    del tensor
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("call, error, match", [
    (lambda: set_tensor_name([1.0], "x"), TypeError, "must be a torch.Tensor, not list"),
    (lambda: set_tensor_name(torch.ones(1), 3), TypeError, "must be a str, not int"),
    (lambda: set_tensor_name(torch.ones(1), ""), ValueError, "non-empty"),
    (lambda: get_tensor_name("w"), TypeError, "must be a torch.Tensor, not str"),
    (lambda: set_tensor_name_in_module(torch.ones(2), "m"), TypeError,
     "Expected a torch.nn.Module, not Tensor"),
])
def test_bad_names_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- inference ----------------------------------------------------------------------------------


def test_linear_with_registered_params_matches_torch(ctx, tmp_path):
    model = _linear(1)
    ctx.registry.register("model", model)
    compiled = _compile(ctx, lambda d: {"y": model(d["x"])}, tmp_path / "f")
    assert compiled.program.state == {"model.weight": "model.weight",
                                      "model.bias": "model.bias"}
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(4, 32)
            torch.testing.assert_close(compiled({"x": x})["y"].cpu(), model(x), **TOL)


def test_state_is_uploaded_once_and_later_calls_move_only_inputs(context, tmp_path):
    model = _linear(2)
    context.registry.register("model", model)
    compiled = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f")
    for _ in range(3):
        compiled({"x": torch.randn(4, 32)})
    report = context.report()
    (load,) = [r for r in report if r.kind == "load"]
    assert load.state_bytes == load.bytes["host"] == _state_nbytes(model, context)
    calls = report.calls()
    assert len(calls) == 3
    input_bytes = compiled.input_specs["x"].layout.nbytes
    for record in calls:
        assert record.state_bytes == 0
        assert record.bytes["host"] == input_bytes
    data = json.loads(report.to_json())
    assert data["records"][0]["state_bytes"] == load.state_bytes
    assert data["totals"]["state_bytes"] == load.state_bytes
    assert "state B" in report.table()
    assert "[state model.weight]" in report.table(commands=True)


def test_two_functions_share_one_upload(context, tmp_path):
    model = _linear(3)
    context.registry.register("model", model)
    f = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f")
    g = _compile(context, lambda d: {"y": torch.relu(model(d["x"])) * 2}, tmp_path / "g")
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.testing.assert_close(f({"x": x})["y"].cpu(), model(x), **TOL)
        torch.testing.assert_close(g({"x": x})["y"].cpu(), torch.relu(model(x)) * 2, **TOL)
    assert context.report().totals["state_bytes"] == _state_nbytes(model, context)
    owners = context.device.allocator.owners()
    assert owners["registered state 'model.weight'"][0] == 1, "one device copy for both"
    assert owners["registered state 'model.bias'"][0] == 1


def test_two_models_in_one_context_are_kept_apart(ctx, tmp_path):
    first, second = _linear(4), _linear(5)
    ctx.registry.register("first", first)
    ctx.registry.register("second", second)
    f = _compile(ctx, lambda d: {"y": first(d["x"])}, tmp_path / "first")
    g = _compile(ctx, lambda d: {"y": second(d["x"])}, tmp_path / "second")
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.testing.assert_close(f({"x": x})["y"].cpu(), first(x), **TOL)
        torch.testing.assert_close(g({"x": x})["y"].cpu(), second(x), **TOL)
    assert set(f.program.state.values()) == {"first.weight", "first.bias"}
    assert set(g.program.state.values()) == {"second.weight", "second.bias"}


def test_an_unregistered_closed_over_tensor_stays_a_program_constant(context, tmp_path):
    model = _linear(6)
    compiled = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f")
    assert compiled.program.state == {}
    (load,) = [r for r in context.report() if r.kind == "load"]
    assert load.state_bytes == 0 and load.bytes["host"] == _state_nbytes(model, context)


def test_two_precisions_keep_one_copy_each(context, tmp_path):
    model = _linear(7)
    context.registry.register("model", model)
    f32 = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f32")
    f16 = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f16",
                   options={"float_dtype": "half"})
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.testing.assert_close(f32({"x": x})["y"].cpu(), model(x), **TOL)
        torch.testing.assert_close(f16({"x": x})["y"].cpu(), model(x), rtol=1e-2, atol=1e-2)
    loads = [r.state_bytes for r in context.report() if r.kind == "load"]
    assert loads[0] == _state_nbytes(model, context) and 0 < loads[1] < loads[0]


def test_a_reloaded_program_shares_the_copy_and_needs_the_registration(tmp_path):
    model = _linear(8)
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f")
        again = context.load_codegen_dir(storage.path(tmp_path / "f"))
        assert again.program.state == {"model.weight": "model.weight",
                                       "model.bias": "model.bias"}
        assert [r.state_bytes for r in context.report() if r.kind == "load"][1] == 0
        with torch.no_grad():
            x = torch.randn(4, 32)
            torch.testing.assert_close(again({"x": x})["y"].cpu(), model(x), **TOL)
    with Context(MNDevice("mncore2:auto")) as fresh:
        with pytest.raises(RegistrationError, match="'model.weight'.*not registered"):
            fresh.load_codegen_dir(storage.path(tmp_path / "f"))
        fresh.registry.register("model", _linear(9, 32, 8))
        with pytest.raises(RegistrationError, match=r"compiled for .* shape \(16, 32\)"):
            fresh.load_codegen_dir(storage.path(tmp_path / "f"))


# -- value proxies ------------------------------------------------------------------------------


def test_registered_value_proxy_reads_the_device_copy_and_owns_nothing(ctx):
    model = _linear(10)
    ctx.register_param(_named(model.weight, "w"))
    proxy = ctx.get_registered_value_proxy(model.weight)
    assert proxy.spec.name == "w" and proxy.shape == model.weight.shape
    torch.testing.assert_close(proxy.cpu(), model.weight.detach())
    buffer = proxy.buffer
    proxy.free()
    del proxy
    gc.collect()
    again = ctx.get_registered_value_proxy(model.weight)
    assert again.buffer == buffer
    if buffer is not None:
        assert ctx.device.is_live(buffer), "freeing the proxy must not free the registry's copy"
    torch.testing.assert_close(again.cpu(), model.weight.detach())


def test_invalidate_makes_a_registered_value_proxy_stale(context):
    model = _linear(11)
    context.registry.register("model", model)
    proxy = context.get_registered_value_proxy(model.bias)
    context.invalidate()
    with pytest.raises(StaleTensorError, match="freed"):
        proxy.cpu()


def _named(tensor: torch.Tensor, name: str) -> torch.Tensor:
    set_tensor_name(tensor, name)
    return tensor


# -- invalidate and synchronize -----------------------------------------------------------------


def test_a_host_edit_reaches_the_device_only_after_invalidate(ctx, tmp_path):
    model = _linear(12)
    ctx.registry.register("model", model)
    compiled = _compile(ctx, lambda d: {"y": model(d["x"])}, tmp_path / "f")
    x = torch.randn(4, 32)
    with torch.no_grad():
        before = model(x)
        compiled({"x": x})
        model.weight.add_(1.0)
        torch.testing.assert_close(compiled({"x": x})["y"].cpu(), before, **TOL)
        ctx.invalidate()
        torch.testing.assert_close(compiled({"x": x})["y"].cpu(), model(x), **TOL)
    if ctx.mndevice.name != "pfvm:cpu":
        last = ctx.report().calls()[-1]
        assert last.state_bytes == _state_nbytes(model, ctx), "the next call re-uploads"


def test_synchronize_brings_device_writes_back_in_place(ctx, tmp_path):
    model = _linear(13)
    ctx.registry.register("model", model)
    weight = model.weight
    proxy = ctx.get_registered_value_proxy(weight)
    new = torch.randn_like(weight)
    _write_device_copy(ctx, "model.weight", proxy, new)
    ctx.registry.mark_written("model.weight")
    assert not torch.equal(weight.detach(), new), "the host is stale until synchronize"
    ctx.synchronize()
    assert model.weight is weight and weight.requires_grad, "updated in place"
    torch.testing.assert_close(weight.detach(), new)
    records = len(ctx.report())
    ctx.synchronize()
    assert len(ctx.report()) == records, "nothing dirty: nothing to read"


def test_a_copy_in_another_layout_starts_from_the_written_value(context, tmp_path):
    model = _linear(14)
    context.registry.register("model", model)
    f32 = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f32")
    proxy = context.get_registered_value_proxy(model.bias)
    new = torch.randn_like(model.bias)
    _write_device_copy(context, "model.bias", proxy, new)
    context.registry.mark_written("model.bias")
    f16 = _compile(context, lambda d: {"y": model(d["x"])}, tmp_path / "f16",
                   options={"float_dtype": "half"})
    # The host was brought up to date from the written copy before the float16 copy was made.
    torch.testing.assert_close(model.bias.detach(), new)
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.testing.assert_close(f16({"x": x})["y"].cpu(), model(x), rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(f32({"x": x})["y"].cpu(), model(x), **TOL)


def _write_device_copy(context, name, proxy, value):
    """What a training Launch would do: write a registered tensor's device copy."""
    if proxy.buffer is None:  # the host reference: its copy is a host snapshot
        copies = context.registry._entry(name).copies
        next(iter(copies.values())).copy_(value)
    else:
        context.device.poke(proxy.buffer, to_device(value, proxy.spec.layout))


# -- bad input ----------------------------------------------------------------------------------


def test_registering_an_unnamed_tensor_is_an_error(context):
    param = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(RegistrationError, match="has no name.*set_tensor_name"):
        context.register_param(param)
    with pytest.raises(RegistrationError, match="has no name"):
        context.register_buffer(torch.ones(2))
    assert len(context.registry) == 0


def test_two_tensors_under_one_name_is_an_error_and_changes_nothing(context):
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.zeros(2))
    context.register_param(_named(a, "p"))
    set_tensor_name(b, "p")
    with pytest.raises(RegistrationError, match="Another tensor .* already registered under "
                                                "the name 'p'"):
        context.register_param(b)
    assert context.registry.tensor("p") is a
    model = _linear(15)
    set_tensor_name_in_module(model, "old")
    context.register_param(_named(torch.ones(1), "m.bias"))
    with pytest.raises(RegistrationError, match="'m.bias'"):
        context.registry.register("m", model)
    assert get_tensor_name(model.weight) == "old.weight", "nothing renamed on error"
    assert "m.weight" not in context.registry


def test_one_tensor_under_two_names_is_an_error(context):
    model = _linear(16)
    assert context.registry.register("model", model) == ["model.weight", "model.bias"]
    assert context.registry.register("model", model) == ["model.weight", "model.bias"]
    with pytest.raises(RegistrationError, match="already registered as 'model.weight'"):
        context.registry.register("other", model)
    assert get_tensor_name(model.weight) == "model.weight"


def test_a_value_proxy_of_an_unregistered_tensor_is_an_error(ctx):
    tensor = _named(torch.ones(2, 2), "loose")
    with pytest.raises(RegistrationError, match="named 'loose'.*not registered in this Context"):
        ctx.get_registered_value_proxy(tensor)
    with pytest.raises(TypeError, match="must be a torch.Tensor, not str"):
        ctx.get_registered_value_proxy("loose")
    assert len(ctx.report()) == 0


def test_register_rejects_a_non_module_and_a_bad_name(context):
    with pytest.raises(TypeError, match="Expected a torch.nn.Module, not dict"):
        context.registry.register("m", {})
    with pytest.raises(TypeError, match="must be a str, not int"):
        context.registry.register(3, _linear(17))


# -- the example --------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_example_runs(tmp_path, device):
    lines = run_example("registered_params.py", device, cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "registered_params: OK"
    assert "two models in one Context: each function reads its own parameters" in lines


# -- the compiler's side ------------------------------------------------------------------------


def test_capture_marks_registered_constants_as_state():
    from mncore_compiler.capture import capture_step

    model, loose = _linear(18), torch.ones(16)
    captured = capture_step(lambda d: {"y": model(d["x"]) + loose}, {"x": torch.randn(4, 32)},
                            registered={id(model.weight): "net.weight"})
    assert captured.state == {"model.weight": "net.weight"}
    assert captured.state_writes == {}  # inference: nothing updated
    assert {"model.weight", "model.bias", "loose"} <= set(captured.graph.constants)


def test_program_state_is_saved_checked_and_reloaded(tmp_path):
    from mncore_compiler.driver import CompileRequest, compile_function
    from mncore_compiler.errors import CodegenError
    from mncore_compiler.program import DeviceProgram, body_checksum

    model = _linear(19)
    program = compile_function(lambda d: {"y": model(d["x"])}, {"x": torch.randn(4, 32)},
                               CompileRequest(registered={id(model.bias): "m.bias"}))
    assert program.state == {"model.bias": "m.bias"}
    assert "registered state 'm.bias'" in program.describe()
    program.save(tmp_path)
    assert DeviceProgram.load(tmp_path).state == {"model.bias": "m.bias"}
    path = tmp_path / "program.json"
    body = json.loads(path.read_text())
    body["state"] = {"nope": "m.bias"}
    body.pop("sha256")
    body["sha256"] = body_checksum(body)  # a consistent but wrong program
    path.write_text(json.dumps(body))
    with pytest.raises(CodegenError, match="'state' names \\['nope'\\]"):
        DeviceProgram.load(tmp_path)
