"""Loop-carried state: an output compiled into its own function's input layout relocates."""

from __future__ import annotations

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mncore_compiler.layouts import ConstraintError
from pipeline_fns import decode_step


def _samples(rows=16, cols=64):
    return {"k": torch.randn(rows, cols), "x": torch.randn(rows, cols)}


def _eager_loop(k, xs):
    ys = []
    for x in xs:
        out = decode_step({"k": k, "x": x})
        k = out["k_out"]
        ys.append(out["y"])
    return k, ys


def test_loop_carried_output_relocates_on_every_call_after_the_first(context, tmp_path, seed):
    samples = _samples()
    step = context.compile(decode_step, samples, storage.path(tmp_path / "d"),
                           io_spec_constraints={"k_out": "k"})
    assert step.output_specs["k_out"].is_memcopyable_to(step.input_specs["k"])
    xs = [torch.randn(16, 64) for _ in range(4)]
    k = samples["k"]
    ys = []
    for x in xs:
        out = step({"k": k, "x": x})
        k = out["k_out"]
        ys.append(out["y"].cpu())
    calls = context.report().calls("decode_step")
    assert [c.relocations for c in calls] == [0, 1, 1, 1]
    assert all(c.conversions == 0 and c.bytes["converter"] == 0 for c in calls)
    want_k, want_ys = _eager_loop(samples["k"], xs)
    torch.testing.assert_close(k.cpu(), want_k)
    for got, want in zip(ys, want_ys, strict=True):
        torch.testing.assert_close(got, want)


def test_without_the_constraint_the_loop_converts_every_step(context, tmp_path):
    samples = _samples()
    step = context.compile(decode_step, samples, storage.path(tmp_path / "d"))
    k = samples["k"]
    for _ in range(3):
        k = step({"k": k, "x": samples["x"]})["k_out"]
    assert [c.conversions for c in context.report().calls("decode_step")] == [0, 1, 1]


def test_loop_carried_follows_the_inputs_own_constraint(context, tmp_path):
    samples = _samples()
    probe = context.compile(decode_step, samples, storage.path(tmp_path / "p"))
    native = probe.output_specs["k_out"]
    step = context.compile(decode_step, samples, storage.path(tmp_path / "d"),
                           io_spec_constraints={"k": native, "k_out": "k"})
    assert step.input_specs["k"].layout == native.layout
    assert step.output_specs["k_out"].is_memcopyable_to(step.input_specs["k"])


def test_loop_carried_keys_of_compile_automap(context, tmp_path):
    def step(k, x):
        return k * 0.5 + x, (k + x).sum(dim=0)

    k, x = torch.randn(16, 64), torch.randn(16, 64)
    fn = context.compile_automap(step, (k, x), None, storage.path(tmp_path / "a"),
                                 io_spec_constraints={"out.0": "args.0"})
    state = k
    for _ in range(3):
        state, _ = fn(state, x)
    assert [c.relocations for c in context.report().calls()][-2:] == [1, 1]
    want = k
    for _ in range(3):
        want = want * 0.5 + x
    torch.testing.assert_close(state.cpu(), want)


def test_a_name_that_is_no_input_is_a_clear_error(context, tmp_path):
    with pytest.raises(ConstraintError, match=r"'kk': a str value must name an input .*"
                                              r"\['k', 'x'\]"):
        context.compile(decode_step, _samples(), storage.path(tmp_path / "d"),
                        io_spec_constraints={"k_out": "kk"})


def test_a_str_on_an_input_key_is_a_clear_error(context, tmp_path):
    with pytest.raises(ConstraintError, match=r"goes on an output, but 'x' is an input"):
        context.compile(decode_step, _samples(), storage.path(tmp_path / "d"),
                        io_spec_constraints={"x": "k"})


def test_an_output_whose_shape_differs_is_a_clear_error(context, tmp_path):
    with pytest.raises(ConstraintError, match=r"\['y'\] = 'k' asks output 'y' to be produced "
                                              r"in the layout of input 'k'.*shape \(64,\)"):
        context.compile(decode_step, _samples(), storage.path(tmp_path / "d"),
                        io_spec_constraints={"y": "k"})


def test_an_output_whose_dtype_differs_is_a_clear_error(context, tmp_path):
    def cast(inputs):
        return {"h": inputs["k"].to(torch.float16)}

    with pytest.raises(ConstraintError, match=r"input 'k'.*float32 .* but 'h' is a float16"):
        context.compile(cast, {"k": torch.randn(8, 8)}, storage.path(tmp_path / "d"),
                        io_spec_constraints={"h": "k"})


def test_a_key_that_is_no_io_is_a_clear_error(context, tmp_path):
    with pytest.raises(ConstraintError, match=r"'z' is not an input or output"):
        context.compile(decode_step, _samples(), storage.path(tmp_path / "d"),
                        io_spec_constraints={"z": "k"})


def test_loop_carried_with_16_bit_compute(tmp_path):
    samples = {n: t.half() for n, t in _samples().items()}
    with Context(MNDevice("mncore2:auto")) as ctx:
        step = ctx.compile(decode_step, samples, storage.path(tmp_path / "d"),
                           options={"float_dtype": "half"}, io_spec_constraints={"k_out": "k"})
        k = samples["k"]
        for _ in range(2):
            k = step({"k": k, "x": samples["x"]})["k_out"]
        assert ctx.report().calls("decode_step")[-1].relocations == 1
