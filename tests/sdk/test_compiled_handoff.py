"""The headline on the functional model: relocation moves nothing, conversion does the work."""

from __future__ import annotations

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mncore_hdl.layout import Layout


def producer(inputs):
    return {"shared": inputs["x"] * 2}


def consumer(inputs):
    return {"result": inputs["shared"] + 1}


CASES = [((32, 64), torch.float32), ((33, 65), torch.float32), ((2, 33, 65), torch.float32),
         ((32, 64), torch.float16), ((16, 48), torch.bfloat16)]


def _compile_pair(context, tmp_path, shape, dtype, constrained):
    sample = torch.randn(shape).to(dtype)
    float_dtype = {torch.float32: "float", torch.float16: "half",
                   torch.bfloat16: "bfloat16"}[dtype]
    options = {"float_dtype": float_dtype}
    cons = context.compile(consumer, {"shared": sample}, storage.path(tmp_path / "c"),
                           options=options)
    constraints = {"shared": cons.input_specs["shared"]} if constrained else None
    prod = context.compile(producer, {"x": sample}, storage.path(tmp_path / "p"),
                           options=options, io_spec_constraints=constraints)
    return prod, cons, sample


@pytest.mark.parametrize("shape, dtype", CASES)
def test_constrained_handoff_is_a_relocation(context, tmp_path, seed, shape, dtype):
    prod, cons, sample = _compile_pair(context, tmp_path, shape, dtype, constrained=True)
    assert prod.output_specs["shared"].is_memcopyable_to(cons.input_specs["shared"])
    x = torch.randn(shape).to(dtype)
    shared = prod({"x": x})["shared"]
    result = cons({"shared": shared})["result"].cpu()
    call = context.report().calls("consumer")[-1]
    assert call.relocations == 1 and call.conversions == 0
    assert call.bytes["converter"] == 0 and call.bytes["host"] == 0
    assert [c.command.split()[0] for c in call.commands] == ["Bind", "Launch"]
    assert cons.bindings["shared"] == shared.buffer
    assert cons.bindings["shared"].address == shared.buffer.address
    torch.testing.assert_close(result, x * 2 + 1)


@pytest.mark.parametrize("shape, dtype", CASES)
def test_unconstrained_handoff_converts_on_the_device(context, tmp_path, seed, shape, dtype):
    prod, cons, sample = _compile_pair(context, tmp_path, shape, dtype, constrained=False)
    out_spec, in_spec = prod.output_specs["shared"], cons.input_specs["shared"]
    assert not out_spec.is_memcopyable_to(in_spec)
    x = torch.randn(shape).to(dtype)
    shared = prod({"x": x})["shared"]
    result = cons({"shared": shared})["result"].cpu()
    call = context.report().calls("consumer")[-1]
    assert call.conversions == 1 and call.relocations == 0
    assert call.bytes["host"] == 0
    assert call.bytes["converter"] == out_spec.nbytes + in_spec.nbytes
    tensor_bytes = x.numel() * x.element_size()
    if out_spec.nbytes == in_spec.nbytes == tensor_bytes:  # no padding: exactly 2x the tensor
        assert call.bytes["converter"] == 2 * tensor_bytes
    assert cons.bindings["shared"] != shared.buffer
    torch.testing.assert_close(result, x * 2 + 1)


def test_seed_shape_conversion_moves_twice_the_tensor(context, tmp_path):
    prod, cons, _ = _compile_pair(context, tmp_path, (32, 64), torch.float32, False)
    cons(prod({"x": torch.ones(32, 64)}))
    assert context.report().calls("consumer")[-1].bytes["converter"] == 2 * 32 * 64 * 4


def test_both_paths_give_identical_results(tmp_path, seed):
    x = torch.randn(33, 65)
    results = []
    for constrained in (True, False):
        with Context(MNDevice("mncore2:auto")) as ctx:
            prod, cons, _ = _compile_pair(ctx, tmp_path / str(constrained), (33, 65),
                                          torch.float32, constrained)
            results.append(cons(prod({"x": x}))["result"].cpu())
    assert torch.equal(results[0], results[1])


def test_chain_of_three_functions_relocates_twice(context, tmp_path, seed):
    sample = torch.randn(32, 64)

    def third(inputs):
        return {"out": inputs["y"] - 3}

    def middle(inputs):
        return {"y": torch.relu(inputs["shared"])}

    c3 = context.compile(third, {"y": sample}, storage.path(tmp_path / "3"))
    c2 = context.compile(middle, {"shared": sample}, storage.path(tmp_path / "2"),
                         io_spec_constraints={"y": c3.input_specs["y"]})
    c1 = context.compile(producer, {"x": sample}, storage.path(tmp_path / "1"),
                         io_spec_constraints={"shared": c2.input_specs["shared"]})
    out = c3(c2(c1({"x": sample})))["out"].cpu()
    torch.testing.assert_close(out, torch.relu(sample * 2) - 3)
    calls = context.report().calls()
    assert [c.relocations for c in calls] == [0, 1, 1]
    assert sum(c.bytes["converter"] for c in calls) == 0


def test_strict_mode_refuses_a_conversion_and_says_what_to_do(context, tmp_path):
    from mlsdk import ConversionRequiredError

    sample = torch.randn(32, 64)
    cons = context.compile(consumer, {"shared": sample}, storage.path(tmp_path / "c"),
                           options={"strict": True})
    prod = context.compile(producer, {"x": sample}, storage.path(tmp_path / "p"))
    shared = prod({"x": sample})["shared"]
    before = len(context.report())
    with pytest.raises(ConversionRequiredError, match="io_spec_constraints"):
        cons({"shared": shared})
    assert len(context.report()) == before
    torch.testing.assert_close(shared.cpu(), sample * 2)


def test_host_tensor_after_a_relocation_binds_the_own_buffer_again(context, tmp_path):
    prod, cons, sample = _compile_pair(context, tmp_path, (32, 64), torch.float32, True)
    shared = prod({"x": sample})["shared"]
    cons({"shared": shared})
    assert cons.bindings["shared"] == shared.buffer
    out = cons({"shared": torch.zeros(32, 64)})["result"].cpu()
    assert cons.bindings["shared"] != shared.buffer
    torch.testing.assert_close(out, torch.ones(32, 64))


def test_output_may_share_an_input_name(context, tmp_path, seed):
    """Outputs are their own namespace: ``{"x": x + 1}`` must not overwrite input ``x``."""

    def step(inputs):
        return {"x": inputs["x"] + 1}

    sample = torch.randn(32, 64)
    f = context.compile(step, {"x": sample}, storage.path(tmp_path / "s"))
    assert f.input_specs["x"].layout != f.output_specs["x"].layout
    once = f({"x": sample})["x"]
    twice = f({"x": once})["x"].cpu()
    torch.testing.assert_close(twice, sample + 2)
    g = context.load_codegen_dir(storage.path(tmp_path / "s"))
    assert g.output_specs["x"] == f.output_specs["x"]
    assert g.input_specs["x"] == f.input_specs["x"]


def test_conversion_the_converter_cannot_run_is_refused_before_anything_runs(context, tmp_path):
    from mlsdk import IOSpecMismatchError
    from mncore_hdl.layout import Layout

    def ident(inputs):
        return {"y": inputs["v"] * 1}

    blocks = Layout.parse("(30)/((5:1, 6:5))")
    strided = Layout.parse("(30)/((3:1, 10:3))")
    prod = context.compile(ident, {"v": torch.randn(30)}, storage.path(tmp_path / "p"),
                           io_spec_constraints={"y": blocks})
    cons = context.compile(ident, {"v": torch.randn(30)}, storage.path(tmp_path / "c"),
                           io_spec_constraints={"v": strided})
    y = prod({"v": torch.arange(30.0)})["y"]
    before = len(context.report())
    with pytest.raises(IOSpecMismatchError, match="the layout converter cannot convert"):
        cons({"v": y})
    assert len(context.report()) == before
    torch.testing.assert_close(y.cpu(), torch.arange(30.0))


def scale(inputs):
    return {"y": inputs["x"] * 3}


def test_an_interrupted_compiled_call_hands_nothing_out_and_rebinds(context, tmp_path,
                                                                   monkeypatch):
    """Ctrl-C inside a call: the lock is free, its outputs are given back, the next call is
    right, and a Bind that was under way is redone."""
    x = torch.arange(64.0).reshape(8, 8)
    f = context.compile(scale, {"x": x}, storage.path(tmp_path / "f"))
    g = context.compile(scale, {"x": x}, storage.path(tmp_path / "g"),
                        io_spec_constraints={"y": f.input_specs["x"]})
    producer = g({"x": x})["y"]  # in f's input layout: handed over by a Bind
    device = context.device
    live = len(device.allocator.live)
    real = device.execute
    state = {"armed": True}

    def interrupt_at_launch(command):
        if state["armed"] and type(command).__name__ == "Launch":
            state["armed"] = False
            raise KeyboardInterrupt
        return real(command)

    monkeypatch.setattr(device, "execute", interrupt_at_launch)
    with pytest.raises(KeyboardInterrupt):
        f({"x": producer})  # relocation: binds x to the producer's buffer, then Launch
    assert device.lock.acquire_if_idle()
    device.lock.__exit__()
    assert len(device.allocator.live) == live
    assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
    assert torch.equal(f({"x": producer})["y"].cpu(), x * 9)

    state["armed"] = True
    binds = []

    def interrupt_after_bind(command):
        result = real(command)
        if state["armed"] and type(command).__name__ == "Bind":
            state["armed"] = False
            binds.append(command)
            raise KeyboardInterrupt  # the register was written; the runtime never heard
        return result

    monkeypatch.setattr(device, "execute", interrupt_after_bind)
    with pytest.raises(KeyboardInterrupt):
        f({"x": producer})
    monkeypatch.setattr(device, "execute", real)
    assert "x" not in f.bindings  # forgotten, so the next call binds it again
    assert torch.equal(f({"x": x})["y"].cpu(), x * 3)


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
