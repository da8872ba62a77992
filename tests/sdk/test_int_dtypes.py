"""int32, int64 and bool tensors: exact layouts and conversions, ops against torch on the
functional model and the host reference, a classifier's accuracy and loss, and range errors."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mlsdk import Context, DeviceError, InputError, IOSpec, MNDevice, storage
from mlsdk.testing.examples import run_example
from mncore_compiler.capture import capture
from mncore_compiler.errors import CaptureError, UnsupportedOperationError
from mncore_compiler.program import DeviceProgram
from mncore_hdl.layout import (
    DTYPES,
    ElementRangeError,
    UnsupportedConversion,
    check_representable,
    conversion,
    element_type,
    from_device,
    host_layout,
    native_layout,
    to_device,
)
from mncore_hdl.layout.mapping import from_device_reference, to_device_reference
from mncore_hdl.layout.random_layouts import random_layout

INT_DTYPES = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
DEVICES = ["mncore2:auto", "pfvm:cpu"]
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
Fn = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]


# -- element types and layouts ------------------------------------------------------------------

def test_element_types() -> None:
    assert element_type(torch.int32) == DTYPES["int32"] and DTYPES["int32"].bits == 32
    assert element_type("long").name == "int64" and DTYPES["int64"].bits == 32
    assert DTYPES["int64"].stored_as == "int32" and DTYPES["int64"].lane_level == "W"
    assert DTYPES["bool"].bits == 16 and DTYPES["bool"].lane_level == "H"
    assert DTYPES["int64"].value_range == (INT32_MIN, INT32_MAX)
    assert DTYPES["bool"].value_range is None and not DTYPES["int32"].narrowed


def _extreme_tensor(dtype: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Values across the whole range a lane holds, its two ends included."""
    gen = torch.Generator().manual_seed(seed)
    if dtype == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    values = torch.randint(INT32_MIN, INT32_MAX, shape, generator=gen, dtype=torch.int64)
    flat = values.view(-1)
    flat[0] = INT32_MIN
    flat[-1] = INT32_MAX
    return values.to(INT_DTYPES[dtype])


@st.composite
def int_layout_pairs(draw):
    dtype = draw(st.sampled_from(sorted(INT_DTYPES)))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 24), min_size=rank, max_size=rank)))
    rng = draw(st.randoms(use_true_random=False))
    return random_layout(rng, shape, dtype), random_layout(rng, shape, dtype)


@settings(max_examples=80, deadline=None)
@given(int_layout_pairs(), st.integers(0, 2**31 - 1))
def test_int_round_trip_and_conversion_exact(pair, seed) -> None:
    """Every representable value survives to_device/from_device (both paths) and a DRAM-to-DRAM
    conversion there and back, bit for bit."""
    a, b = pair
    tensor = _extreme_tensor(a.dtype, a.shape, seed)
    image = to_device(tensor, a)
    assert np.array_equal(image, to_device_reference(tensor, a)), f"{a} (seed {seed})"
    for back in (from_device(image, a), from_device_reference(image, a),
                 from_device(np.array(image), a, copy=False)):
        assert back.dtype == tensor.dtype and torch.equal(back, tensor), f"{a} (seed {seed})"
    try:
        there, home = conversion(a, b), conversion(b, a)
    except UnsupportedConversion:
        assume(False)
        return
    assert there.elem_bits == element_type(a.dtype).bits
    mid = there.execute(image)
    assert torch.equal(from_device(mid, b), tensor), f"{a} -> {b} (seed {seed})"
    assert np.array_equal(home.execute(mid), image), f"{a} -> {b} -> {a} (seed {seed})"


def test_int64_out_of_range_is_named() -> None:
    labels = torch.tensor([[0, 1], [1 << 31, -3]])
    layout = host_layout((2, 2), "int64")
    with pytest.raises(ElementRangeError, match=r"int64 value 2147483648 at index \(1, 0\) is "
                       r"outside \[-2147483648, 2147483647\]"):
        to_device(labels, layout)
    with pytest.raises(ElementRangeError, match="value -2147483649"):
        check_representable(torch.tensor([INT32_MIN - 1]))
    check_representable(torch.tensor([INT32_MIN, INT32_MAX]))  # the ends fit
    assert torch.equal(labels, torch.tensor([[0, 1], [1 << 31, -3]]))  # untouched


def test_iospec_dtype_matches_layout_element() -> None:
    layout = native_layout((4, 8), "int64")
    spec = IOSpec("labels", (4, 8), torch.int64, layout)
    assert spec.nbytes == layout.nbytes and "int64" in repr(spec)
    with pytest.raises(ValueError, match="dtype int32 disagrees with its layout's element type "
                       "int64"):
        IOSpec("labels", (4, 8), torch.int32, layout)


# -- ops against torch on every device ----------------------------------------------------------

def _compile(device: str, fn: Fn, inputs: dict[str, torch.Tensor], tmp: Path,
             **kwargs) -> tuple[Context, object]:
    context = Context(MNDevice(device))
    compiled = context.compile(fn, inputs, storage.path(tmp / "fn"), **kwargs)
    return context, compiled


def _check_against_torch(device: str, fn: Fn, inputs: dict[str, torch.Tensor], tmp: Path,
                         atol: float = 1e-6) -> dict[str, torch.Tensor]:
    originals = {k: v.clone() for k, v in inputs.items()}
    context, compiled = _compile(device, fn, inputs, tmp)
    got = {k: v.cpu() for k, v in compiled(inputs).items()}  # type: ignore[operator]
    want = fn(originals)
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, f"{name}: {got[name].dtype} vs {value.dtype}"
        assert got[name].shape == value.shape, f"{name}: {got[name].shape} vs {value.shape}"
        if value.is_floating_point():
            torch.testing.assert_close(got[name], value, atol=atol, rtol=1e-5)
        else:
            assert torch.equal(got[name], value), f"{name}: {got[name]} vs {value}"
    for name, value in inputs.items():
        assert torch.equal(value, originals[name]), f"input {name} changed"
    context.close()
    return got


GEN = torch.Generator().manual_seed(11)
X = torch.randn(6, 5, generator=GEN)
Y = torch.randn(6, 5, generator=GEN)
LABELS = torch.randint(0, 5, (6,), generator=GEN)
COUNTS = torch.randint(-40, 40, (6, 5), generator=GEN, dtype=torch.int32)
MASK = torch.rand(6, 5, generator=GEN) > 0.5

# case -> (the inputs it reads, the function)
OP_CASES: dict[str, tuple[str, Fn]] = {
    "eq_ne_tensor": ("xyc l", lambda d: {"eq": d["x"] == d["y"],
                                         "ne": d["c"] != d["l"].unsqueeze(1)}),
    "eq_ne_scalar": ("cl", lambda d: {"eq": d["c"] == 3, "ne": d["l"] != 1.0}),
    "lt_le_gt_ge": ("xycl", lambda d: {"lt": d["x"] < d["y"], "le": d["c"] <= d["c"].abs(),
                                       "gt": d["x"] > 0.25, "ge": d["l"] >= 2}),
    "compare_bool": ("mx", lambda d: {"eq": d["m"] == True,  # noqa: E712
                                      "ne": d["m"] != d["x"].gt(0)}),
    "argmax_argmin": ("xc", lambda d: {"a": d["x"].argmax(dim=1), "b": d["x"].argmin(0),
                                       "c": d["c"].argmax(),
                                       "d": d["x"].argmax(1, keepdim=True)}),
    "max_min_indices": ("xc", lambda d: dict(zip(
        ("mv", "mi", "nv", "ni"), (*torch.max(d["x"], 1), *torch.min(d["c"], 0, keepdim=True)),
        strict=True))),
    "where": ("mxyc", lambda d: {"w": torch.where(d["m"], d["x"], d["y"]),
                                 "s": torch.where(d["x"] > 0, d["x"], 0.0),
                                 "i": torch.where(d["m"], d["c"], -1)}),
    "sums": ("mcl", lambda d: {"bool": d["m"].sum(), "rows": d["m"].sum(dim=1),
                               "int": d["c"].sum(0, keepdim=True), "long": d["l"].sum()}),
    "casts": ("clxm", lambda d: {"l": d["c"].to(torch.int64), "f": d["l"].float(),
                                 "i": d["x"].int(), "b": d["c"].bool(),
                                 "bi": d["m"].to(torch.int32), "bf": d["m"].half()}),
    "int_arith": ("lcm", lambda d: {"a": d["l"] * 2 + 1, "b": 10 - d["c"], "c": d["c"] + d["m"],
                                    "d": d["c"] / 4, "e": -d["c"].abs()}),
    "amax_amin": ("cxl", lambda d: {"mx": d["c"].amax(1), "mn": d["x"].amin(0),
                                    "lm": d["l"].max()}),
}
INPUTS = {"x": X, "y": Y, "c": COUNTS, "l": LABELS, "m": MASK}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_matches_torch(case: str, device: str, tmp_path: Path) -> None:
    names, fn = OP_CASES[case]
    inputs = {k: v for k, v in INPUTS.items() if k in names}
    _check_against_torch(device, fn, inputs, tmp_path)


def test_argmax_and_max_take_the_first_of_ties(tmp_path: Path) -> None:
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    got = _check_against_torch(
        "mncore2:auto", lambda d: {"a": d["x"].argmax(1), "i": d["x"].max(1).indices,
                                   "n": d["x"].argmin(1)}, {"x": x}, tmp_path)
    assert got["a"].tolist() == [1, 0] and got["i"].tolist() == [1, 0]


# -- the classifier: accuracy and loss ----------------------------------------------------------

def _classifier() -> tuple[Fn, dict[str, torch.Tensor]]:
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def evaluate(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        logits = model(d["x"])
        return {"correct": (logits.argmax(dim=1) == d["labels"]).sum(),
                "loss": F.cross_entropy(logits, d["labels"])}

    x = torch.randn(32, 12)
    labels = torch.randint(0, 4, (32,))
    return evaluate, {"x": x, "labels": labels}


@pytest.mark.parametrize("device", DEVICES)
def test_classifier_accuracy_and_loss(device: str, tmp_path: Path) -> None:
    evaluate, inputs = _classifier()
    got = _check_against_torch(device, evaluate, inputs, tmp_path, atol=1e-5)
    assert got["correct"].dtype == torch.int64 and got["correct"].shape == ()
    assert 0 <= int(got["correct"]) <= 32


@pytest.mark.parametrize("device", DEVICES)
def test_losses_with_class_index_targets(device: str, tmp_path: Path) -> None:
    def losses(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        x, t = d["x"], d["t"]
        logp = F.log_softmax(x, dim=1)
        return {"mean": F.cross_entropy(x, t), "sum": F.cross_entropy(x, t, reduction="sum"),
                "none": F.cross_entropy(x, t, reduction="none"),
                "ignored": F.cross_entropy(x, t, ignore_index=2),
                "nll": F.nll_loss(logp, t), "logp": logp,
                "nll_none": F.nll_loss(logp, t, reduction="none"),
                "single": F.cross_entropy(d["x1"], d["t1"])}

    gen = torch.Generator().manual_seed(3)
    inputs = {"x": torch.randn(10, 6, generator=gen),
              "t": torch.randint(0, 6, (10,), generator=gen),
              "x1": torch.randn(6, generator=gen), "t1": torch.tensor(4)}
    _check_against_torch(device, losses, inputs, tmp_path, atol=1e-5)


def test_loss_graph_is_log_softmax_then_nll_loss() -> None:
    evaluate, inputs = _classifier()
    ops = [node.op for node in capture(evaluate, inputs).nodes]
    assert ops.count("log_softmax") == 1 and ops.count("nll_loss") == 1
    assert {"argmax", "eq", "sum"} <= set(ops)


def test_reduced_precision_keeps_integers(tmp_path: Path) -> None:
    """float_dtype="half" runs the float arithmetic in float16; int and bool values stay."""
    evaluate, inputs = _classifier()
    graph = capture(evaluate, inputs, float_dtype="half")
    types = graph.value_types()
    assert types["labels"].dtype == "int64" and graph.output_types()["correct"].dtype == "int64"
    assert graph.output_types()["loss"].dtype == "float32"
    assert not any(n.op == "cast" and types[n.operands[0]].dtype in ("int64", "bool")
                   for n in graph.nodes)
    context, compiled = _compile("mncore2:auto", evaluate, inputs, tmp_path,
                                 options={"float_dtype": "half"})
    got = compiled(inputs)  # type: ignore[operator]
    want = evaluate(inputs)
    torch.testing.assert_close(got["loss"].cpu(), want["loss"], atol=5e-3, rtol=5e-3)
    assert abs(int(got["correct"].cpu()) - int(want["correct"])) <= 2  # near-tied logits
    context.close()


# -- programs, hand-offs and conversions on the device -------------------------------------------

def test_int_constants_survive_the_codegen_directory(tmp_path: Path) -> None:
    table = torch.tensor([5, -7, INT32_MAX - 9, INT32_MIN, 0, 1])
    keep = torch.tensor([True, False, True, True, False, True])

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"y": table + d["l"] * keep}

    context, compiled = _compile("mncore2:auto", fn, {"l": LABELS}, tmp_path)
    program = DeviceProgram.load(tmp_path / "fn")
    assert torch.equal(program.graph.constants["table"], table)
    assert torch.equal(program.graph.constants["keep"], keep)
    assert torch.equal(compiled({"l": LABELS})["y"].cpu(), fn({"l": LABELS})["y"])  # type: ignore
    context.close()


def test_int_and_bool_handoff_converts_on_the_device(tmp_path: Path) -> None:
    context = Context(MNDevice("mncore2:auto"))
    x = torch.randn(6, 10, 5)

    def producer(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"idx": d["x"].argmax(dim=2), "pos": d["x"] > 0}

    def consumer(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"hits": (d["idx"] == 1).sum() + d["pos"].sum()}

    made = context.compile(producer, {"x": x}, storage.path(tmp_path / "p"))
    samples = {"idx": torch.zeros(6, 10, dtype=torch.int64),
               "pos": torch.zeros(6, 10, 5, dtype=torch.bool)}
    used = context.compile(consumer, samples, storage.path(tmp_path / "c"))
    assert not made.output_specs["idx"].is_memcopyable_to(used.input_specs["idx"])
    hits = used(made({"x": x}))["hits"].cpu()
    assert torch.equal(hits, consumer(producer({"x": x}))["hits"])
    record = context.report().calls("consumer")[-1]
    assert record.conversions == 2 and record.bytes["converter"] > 0
    context.close()


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_out_of_range_int64_input_is_rejected(device: str, tmp_path: Path) -> None:
    evaluate, inputs = _classifier()
    context, compiled = _compile(device, evaluate, inputs, tmp_path)
    bad = inputs["labels"].clone()
    bad[7] = 5_000_000_000
    kept = bad.clone()
    before = context.device.dram_snapshot() if device != "pfvm:cpu" else None
    calls = len(context.report())
    with pytest.raises(InputError, match=r"Input 'labels' of evaluate: int64 value 5000000000 at "
                       r"index \(7,\) is outside \[-2147483648, 2147483647\].*nothing was sent"):
        compiled({"x": inputs["x"], "labels": bad})  # type: ignore[operator]
    assert torch.equal(bad, kept)
    assert len(context.report()) == calls
    if before is not None:
        assert _same_snapshot(context.device.dram_snapshot(), before)
    # The function still works with labels in range.
    got = compiled(inputs)["correct"].cpu()  # type: ignore[operator]
    assert torch.equal(got, evaluate(inputs)["correct"])
    context.close()


def _same_snapshot(a: list[dict[int, np.ndarray]], b: list[dict[int, np.ndarray]]) -> bool:
    return len(a) == len(b) and all(
        ga.keys() == gb.keys() and all(np.array_equal(ga[k], gb[k]) for k in ga)
        for ga, gb in zip(a, b, strict=True))


@pytest.mark.parametrize("device", DEVICES)
def test_int64_output_overflow_is_named(device: str, tmp_path: Path) -> None:
    def scale(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"big": d["l"] * (1 << 30) + 1}

    labels = torch.tensor([0, 1, 3])
    context, compiled = _compile(device, scale, {"l": labels}, tmp_path)
    with pytest.raises(DeviceError, match=r"Output 'big' of scale: int64 value 3221225473 at "
                       r"index \(2,\) is outside \[-2147483648, 2147483647\]"):
        compiled({"l": labels})  # type: ignore[operator]
    small = torch.tensor([0, 1, 1])
    assert torch.equal(compiled({"l": small})["big"].cpu(), scale({"l": small})["big"])  # type: ignore
    context.close()


def test_out_of_range_int64_constant_is_a_compile_error() -> None:
    big = torch.tensor([1, 1 << 40])
    with pytest.raises(UnsupportedOperationError, match=r"constant 'big': int64 value "
                       r"1099511627776 at index \(1,\) is outside"):
        capture(lambda d: {"y": d["l"].sum() + big},
                {"l": LABELS})


def test_unsupported_integer_forms_are_named() -> None:
    x = {"x": X, "t": LABELS}
    with pytest.raises(UnsupportedOperationError, match="class weights"):
        capture(lambda d: {"y": F.cross_entropy(d["x"], d["t"], weight=torch.ones(5))}, x)
    with pytest.raises(CaptureError, match="sample input 'x' has dtype uint8") as info:
        capture(lambda d: {"y": d["x"]}, {"x": torch.ones(2, dtype=torch.uint8)})
    assert "int32" in str(info.value) and "bool" in str(info.value)


def test_random_layout_covers_int_dtypes() -> None:
    rng = random.Random(1)
    for dtype in INT_DTYPES:
        layout = random_layout(rng, (5, 7), dtype)
        assert layout.dtype == dtype and layout.element.bits in (16, 32)


# -- the example ------------------------------------------------------------------------------

def test_example_runs(tmp_path: Path) -> None:
    """The example as a user runs it, on its default device (mncore2:auto)."""
    lines = run_example("int_tensors.py", cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "int tensors: accuracy and loss match torch"
    assert any(line.startswith("correct predictions: ") for line in lines)
    assert any("rejected as expected: Input 'labels' of evaluate: int64 value 1099511627776"
               in line for line in lines)
