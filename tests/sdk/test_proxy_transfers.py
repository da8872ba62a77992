"""Explicit transfers: allocate_input_proxy, TensorProxy.load_from / item / numpy."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from mlsdk import (
    Context,
    InputError,
    IOSpecMismatchError,
    MNDevice,
    StaleTensorError,
    TensorProxy,
    storage,
)
from mlsdk.testing.examples import run_example

DEVICES = ["mncore2:auto", "pfvm:cpu"]


def mlp(inputs):
    hidden = torch.relu(inputs["x"] @ inputs["w1"] + inputs["b1"])
    return {"y": hidden @ inputs["w2"], "total": hidden.sum()}


def double(inputs):
    return {"y": inputs["x"] * 2}


def _sample() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(8, 16), "w1": torch.randn(16, 32), "b1": torch.randn(32),
            "w2": torch.randn(32, 4)}


@pytest.fixture(params=DEVICES)
def ctx(request):
    context = Context(MNDevice(request.param))
    yield context
    context.close()


@pytest.fixture
def compiled(ctx, tmp_path):
    return ctx.compile(mlp, _sample(), storage.path(tmp_path / "mlp"))


def _on_device(ctx) -> bool:
    return ctx.mndevice.name != "pfvm:cpu"


# -- allocate_input_proxy ---------------------------------------------------------------------

def test_allocate_gives_one_empty_proxy_per_input_in_its_spec(ctx, compiled):
    proxies = compiled.allocate_input_proxy()
    assert list(proxies) == list(compiled.input_specs)
    for name, proxy in proxies.items():
        assert isinstance(proxy, TensorProxy)
        assert proxy.spec.is_memcopyable_to(compiled.input_specs[name])
        assert proxy.origin == f"input {name!r} of {compiled.key}"
        assert not proxy.loaded
        assert "(empty)" in repr(proxy)
        if _on_device(ctx):
            assert proxy.buffer is not None
            assert proxy.buffer.nbytes == compiled.input_specs[name].nbytes
            assert proxy.buffer != compiled.bindings[name]  # a buffer of its own
        else:
            assert proxy.buffer is None
    if _on_device(ctx):
        again = compiled.allocate_input_proxy()
        assert {p.buffer for p in again.values()}.isdisjoint(p.buffer for p in proxies.values())


def test_allocated_buffers_are_freed_with_the_proxies(context, tmp_path):
    compiled = context.compile(double, {"x": torch.ones(16, 16)}, storage.path(tmp_path / "d"))
    live = len(context.device.allocator.live)
    proxy = compiled.allocate_input_proxy()["x"]
    buffer = proxy.buffer
    assert context.device.is_live(buffer)
    proxy.free()
    assert not context.device.is_live(buffer)
    with pytest.raises(StaleTensorError, match="freed"):
        proxy.load_from(torch.ones(16, 16))
    collected = compiled.allocate_input_proxy()["x"]
    buffer = collected.buffer
    del collected
    gc.collect()
    assert not context.device.is_live(buffer)
    assert len(context.device.allocator.live) == live


def test_allocation_is_all_or_nothing(context, tmp_path, monkeypatch):
    from mlsdk import DeviceMemoryError

    compiled = context.compile(mlp, _sample(), storage.path(tmp_path / "mlp"))
    live = len(context.device.allocator.live)
    real = context.device.allocate
    given = []

    def fail_on_third(layout, owner):
        if len(given) == 2:
            raise DeviceMemoryError(f"no room for a third buffer ({owner})")
        given.append(real(layout, owner))
        return given[-1]

    monkeypatch.setattr(context.device, "allocate", fail_on_third)
    with pytest.raises(DeviceMemoryError, match="no room for a third buffer"):
        compiled.allocate_input_proxy()
    assert len(context.device.allocator.live) == live
    assert not any(context.device.is_live(b) for b in given)


def test_empty_proxy_is_an_error_not_garbage(ctx, compiled):
    proxies = compiled.allocate_input_proxy()
    records = len(ctx.report())
    with pytest.raises(StaleTensorError, match=r"holds no data yet.*call load_from"):
        compiled(proxies)
    with pytest.raises(StaleTensorError, match=r"input 'x' of .*call load_from"):
        proxies["x"].cpu()
    with pytest.raises(StaleTensorError, match="call load_from"):
        proxies["x"].numpy()
    assert len(ctx.report()) == records  # nothing ran


# -- load_from and the call -------------------------------------------------------------------

def test_call_with_loaded_proxies_matches_torch_and_moves_no_host_bytes(ctx, compiled, seed):
    proxies = compiled.allocate_input_proxy()
    for step in range(3):
        sample = _sample()
        for name, proxy in proxies.items():
            proxy.load_from(sample[name], clone=bool(step % 2))
        out = compiled(proxies)
        expected = mlp(sample)
        torch.testing.assert_close(out["y"].cpu(), expected["y"])
        torch.testing.assert_close(out["total"].item(), expected["total"].item(),
                                   rtol=1e-5, atol=1e-4)
        call = ctx.report().calls("mlp")[-1]
        assert call.bytes["host"] == 0
        if _on_device(ctx):
            assert call.relocations == len(proxies) and call.conversions == 0
            assert all(compiled.bindings[n] == p.buffer for n, p in proxies.items())
            kinds = [c.command.split()[0] for c in call.commands]
            assert "HostWrite" not in kinds and "Convert" not in kinds


def test_load_from_is_a_recorded_host_write(context, tmp_path):
    compiled = context.compile(double, {"x": torch.ones(16, 16)}, storage.path(tmp_path / "d"))
    proxy = compiled.allocate_input_proxy()["x"]
    proxy.load_from(torch.full((16, 16), 3.0))
    record = context.report()[-1]
    assert record.kind == "write"
    assert record.function == "x.load_from()"
    assert [c.command for c in record.commands] == [f"HostWrite {proxy.buffer}"]
    assert record.bytes["host"] == proxy.buffer.nbytes
    assert context.report().totals["write"] == 1
    torch.testing.assert_close(proxy.cpu(), torch.full((16, 16), 3.0))


def test_load_from_copies_at_once_so_later_host_changes_never_show(ctx, compiled):
    proxy = compiled.allocate_input_proxy()["b1"]
    for clone in (True, False):
        host = torch.arange(32, dtype=torch.float32)
        proxy.load_from(host, clone=clone)
        host.add_(100)
        torch.testing.assert_close(proxy.cpu(), torch.arange(32, dtype=torch.float32))


def test_load_from_takes_any_strides_and_no_grad(ctx, tmp_path):
    compiled = ctx.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "d"))
    proxy = compiled.allocate_input_proxy()["x"]
    source = torch.randn(12, 8, requires_grad=True)
    proxy.load_from(source.t())
    torch.testing.assert_close(compiled({"x": proxy})["y"].cpu(), source.detach().t() * 2)


def test_bad_load_from_names_expected_and_given_and_keeps_the_data(ctx, compiled):
    proxy = compiled.allocate_input_proxy()["x"]
    good = torch.randn(8, 16)
    proxy.load_from(good)
    records = len(ctx.report())
    with pytest.raises(InputError, match=r"float32 tensor of shape \(8, 16\), not float32 of "
                                         r"shape \(16, 8\)"):
        proxy.load_from(torch.randn(16, 8))
    with pytest.raises(InputError, match=r"float32 tensor of shape \(8, 16\), not float16"):
        proxy.load_from(torch.randn(8, 16).half())
    with pytest.raises(TypeError, match="takes a torch.Tensor, not ndarray"):
        proxy.load_from(np.zeros((8, 16), np.float32))
    with pytest.raises(TypeError, match="not a TensorProxy"):
        proxy.load_from(proxy)
    with pytest.raises(TypeError, match="clone=.*bool"):
        proxy.load_from(good, clone="yes")
    assert len(ctx.report()) == records
    torch.testing.assert_close(proxy.cpu(), good)


def test_load_from_into_an_output_proxy_overwrites_it(ctx, tmp_path):
    compiled = ctx.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "d"))
    out = compiled({"x": torch.ones(8, 12)})["y"]
    assert out.origin is None and out.loaded
    out.load_from(torch.full((8, 12), 5.0))
    torch.testing.assert_close(out.cpu(), torch.full((8, 12), 5.0))


# -- which proxies may feed which inputs ------------------------------------------------------

def test_input_proxy_of_f_feeds_a_compatible_input_of_g(ctx, tmp_path):
    f = ctx.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "f"))
    g = ctx.compile(lambda d: {"z": d["a"] + 1}, {"a": torch.ones(8, 12)},
                    storage.path(tmp_path / "g"))
    proxy = f.allocate_input_proxy()["x"]
    assert proxy.spec.is_memcopyable_to(g.input_specs["a"])
    proxy.load_from(torch.full((8, 12), 2.0))
    torch.testing.assert_close(g({"a": proxy})["z"].cpu(), torch.full((8, 12), 3.0))
    assert ctx.report().calls()[-1].bytes["host"] == 0


def test_input_proxy_with_another_layout_is_an_error_not_a_conversion(ctx, tmp_path):
    f = ctx.compile(double, {"x": torch.ones(32, 64)}, storage.path(tmp_path / "f"))
    native = f.output_specs["y"]  # the compute-native layout, not f's input layout
    g = ctx.compile(lambda d: {"z": d["a"] + 1}, {"a": torch.ones(32, 64)},
                    storage.path(tmp_path / "g"), io_spec_constraints={"a": native})
    proxy = f.allocate_input_proxy()["x"]
    proxy.load_from(torch.ones(32, 64))
    assert not proxy.spec.is_memcopyable_to(g.input_specs["a"])
    records = len(ctx.report())
    bindings = dict(g.bindings)
    with pytest.raises(IOSpecMismatchError, match=r"allocated for input 'x' of double#1 .* "
                                                  r"input 'a' of <lambda> expects .*layout"):
        g({"a": proxy})
    assert len(ctx.report()) == records and g.bindings == bindings
    # An output in that same layout is still handed over by a conversion on a device.
    out = f({"x": torch.ones(32, 64)})["y"]
    torch.testing.assert_close(g({"a": out})["z"].cpu(), torch.full((32, 64), 3.0))


def test_input_proxy_of_another_shape_is_an_error(ctx, compiled):
    proxies = compiled.allocate_input_proxy()
    for proxy in proxies.values():
        proxy.load_from(torch.zeros(proxy.shape))
    swapped = {**proxies, "w1": proxies["w2"]}
    with pytest.raises(IOSpecMismatchError, match=r"allocated for input 'w2'.*input 'w1'.*"
                                                  r"shape \(32, 4\) vs \(16, 32\)"):
        compiled(swapped)


def test_input_proxy_of_another_context_is_a_clear_error(ctx, tmp_path):
    other = Context(MNDevice(ctx.mndevice.name))
    try:
        f = other.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "o"))
        g = ctx.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "c"))
        proxy = f.allocate_input_proxy()["x"]
        proxy.load_from(torch.ones(8, 12))
        records = len(ctx.report())
        with pytest.raises(StaleTensorError, match=r"belongs to another Context .* allocate "
                                                   r"input proxies from a function of this"):
            g({"x": proxy})
        assert len(ctx.report()) == records
        torch.testing.assert_close(proxy.cpu(), torch.ones(8, 12))  # still fine in its own
    finally:
        other.close()
    with pytest.raises(StaleTensorError, match="freed"):
        proxy.load_from(torch.ones(8, 12))


def test_unloaded_function_allocates_nothing(context, tmp_path):
    from mlsdk import FunctionUnloadedError

    compiled = context.compile(double, {"x": torch.ones(8, 12)}, storage.path(tmp_path / "d"))
    compiled.unload()
    with pytest.raises(FunctionUnloadedError, match="allocate its input proxies"):
        compiled.allocate_input_proxy()


# -- item() and numpy() -----------------------------------------------------------------------

def test_item_of_one_element_and_error_otherwise(ctx, compiled):
    sample = _sample()
    out = compiled(sample)
    assert isinstance(out["total"].item(), float)
    assert out["total"].item() == pytest.approx(mlp(sample)["total"].item(), rel=1e-5)
    with pytest.raises(ValueError, match=r"one-element TensorProxy; 'y' has shape \(8, 4\) "
                                         r"\(32 elements\)"):
        out["y"].item()


def test_numpy_is_cpu_numpy_and_bfloat16_says_what_to_do(ctx, tmp_path):
    compiled = ctx.compile(double, {"x": torch.ones(4, 8)}, storage.path(tmp_path / "d"))
    x = torch.randn(4, 8)
    array = compiled({"x": x})["y"].numpy()
    assert isinstance(array, np.ndarray) and array.dtype == np.float32
    np.testing.assert_allclose(array, (x * 2).numpy())
    half = ctx.compile(double, {"x": torch.ones(4, 8, dtype=torch.bfloat16)},
                       storage.path(tmp_path / "b"), options={"float_dtype": "bfloat16"})
    out = half({"x": torch.ones(4, 8, dtype=torch.bfloat16)})["y"]
    with pytest.raises(TypeError, match=r"bfloat16 has no numpy dtype; use "
                                        r"\.cpu\(\)\.float\(\)\.numpy\(\)"):
        out.numpy()
    np.testing.assert_allclose(out.cpu().float().numpy(), np.full((4, 8), 2.0))


# -- the example ------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_example_runs(tmp_path, device):
    lines = run_example("preallocated_inputs.py", device, cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "preallocated inputs succeeded"
    assert sum("call host bytes 0" in ln for ln in lines) == 4
    if device != "pfvm:cpu":
        assert "8 load_from write(s), 18720 host bytes written ahead of the calls" in lines
