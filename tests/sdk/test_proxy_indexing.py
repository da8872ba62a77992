"""TensorProxy indexing (``proxy[:, -n:]``, as MLSDK's ``llm_infer.py`` does): the whole buffer
is read back once and indexed on the host, the result a torch.Tensor; what else a torch tensor
does fails with an error naming ``.cpu()``."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsdk import Context, MNDevice, storage

DEVICES = ["mncore2:auto", "pfvm:cpu"]
SHAPE = (2, 5, 3, 4)


@pytest.fixture(params=DEVICES, scope="module")
def produced(request, tmp_path_factory):
    """A context and the output proxy ``y`` of a compiled function, with its host value."""
    context = Context(MNDevice(request.param))
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(1))
    fn = context.compile(lambda d: {"y": d["x"] * 2 + 1},
                         {"x": x}, storage.path(tmp_path_factory.mktemp("index") / "f"))
    y = fn({"x": x})["y"]
    yield context, y, x * 2 + 1
    context.close()


KEYS = [
    (slice(None), slice(-3, None)), (Ellipsis, slice(-2, None)), (0,), (-1, 2),
    (slice(None), slice(None), slice(None), slice(None, None, 2)), (Ellipsis,),
    (1, Ellipsis, 0), (None, slice(1, 3)), (slice(None), torch.tensor(-2)),
    (slice(None), slice(torch.tensor(-4), None)), (slice(10, None),), (),
]


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_indexing_equals_the_host_tensors(produced, key):
    _, y, want = produced
    got = y[key]
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, want[key], rtol=0, atol=0)


def _index(draw, shape):
    items = []
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            items.append(draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            items.append(slice(draw(st.one_of(st.none(), st.integers(-size - 2, size + 2))),
                               draw(st.one_of(st.none(), st.integers(-size - 2, size + 2))),
                               draw(st.one_of(st.none(), st.integers(1, 3)))))
        else:
            items.append(slice(None))
    cut = draw(st.integers(0, len(items)))
    if draw(st.booleans()):  # an ellipsis in place of some leading dimensions
        start = draw(st.integers(0, cut))
        return tuple([*items[:start], Ellipsis, *items[cut:]])
    return tuple(items[:cut])


@st.composite
def _keys(draw):
    return _index(draw, SHAPE)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(key=_keys())
def test_basic_indexing_property(produced, key):
    _, y, want = produced
    torch.testing.assert_close(y[key], want[key], rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


def test_results_work_with_torch_as_the_example_uses_them(produced):
    _, y, want = produced
    assert torch.allclose(y[:, -2:], want[:, -2:])
    assert torch.equal(y[:, -1].argmax(dim=-1), want[:, -1].argmax(dim=-1))
    torch.testing.assert_close(torch.cat([y[:, :2], y[:, 2:]], dim=1), want, rtol=0, atol=0)
    assert (y[:, -2:] - want[:, -2:]).abs().max() == 0


def test_a_slice_reads_the_whole_buffer_once_and_the_report_says_so(produced):
    context, y, _ = produced
    context.report(clear=True)
    y[:, -3:]
    records = list(context.report())
    if y.buffer is None:  # pfvm:cpu: the result is a host tensor, nothing moves
        assert records == []
        return
    assert [r.kind for r in records] == ["read"]
    assert records[0].function == "y[:, -3:]"
    assert records[0].bytes["host"] == y.buffer.nbytes > 0


def test_what_needs_no_data_works(produced):
    _, y, want = produced
    assert y.shape == want.shape and y.dtype == want.dtype and len(y) == SHAPE[0]
    assert y == y and y != produced[0] and (y in [y])  # identity, as any object


@pytest.mark.parametrize(("key", "error", "message"), [
    ((2,), IndexError, "index 2 .* out of range for dimension 0 of size 2"),
    ((0, 0, 0, 0, 0), IndexError, "too many indices for a tensor of 4 dimensions"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ((slice(None, None, -1),), ValueError, "step must be positive"),
    (([0, 1],), TypeError, r"not list.*proxy\.cpu\(\)\[\.\.\.\]"),
    ((torch.tensor([0, 1]),), TypeError, r"tensor index.*proxy\.cpu\(\)\[\.\.\.\]"),
    ((True,), TypeError, r"boolean or tensor index.*proxy\.cpu\(\)"),
    ((1.5,), TypeError, r"not float.*proxy\.cpu\(\)"),
])
def test_bad_indices_are_clear_errors_before_any_read(produced, key, error, message):
    context, y, _ = produced
    context.report(clear=True)
    with pytest.raises(error, match=message):
        y[key]
    assert list(context.report()) == []


@pytest.mark.parametrize(("use", "message"), [
    (lambda y, t: list(y), r"iterate over proxy\.cpu\(\)"),
    (lambda y, t: bool(y), r"use proxy\.cpu\(\)"),
    (lambda y, t: y == t, r"== on TensorProxy 'y'.*proxy\.cpu\(\)"),
    (lambda y, t: y < 1, r"< on TensorProxy 'y'.*proxy\.cpu\(\)"),
    (lambda y, t: y - t, r"- on TensorProxy 'y'.*proxy\.cpu\(\)"),
    (lambda y, t: 2 * y, r"\* on TensorProxy 'y'.*proxy\.cpu\(\)"),
    (lambda y, t: torch.allclose(y, t),
     r"torch\.allclose\(\) got a TensorProxy \('y'\).*\.cpu\(\)"),
    (lambda y, t: t - y, r"TensorProxy.*'y'.*\.cpu\(\)"),
    (lambda y, t: torch.cat([t, y]), r"proxy\.cpu\(\)"),
])
def test_tensor_uses_name_cpu(produced, use, message):
    _, y, want = produced
    with pytest.raises(TypeError, match=message):
        use(y, want)
    with pytest.raises(ValueError, match=r"one-element TensorProxy.*\.cpu\(\)"):
        y.item()


def test_item_of_a_one_element_slice_and_proxy(tmp_path):
    context = Context(MNDevice("mncore2:auto"))
    fn = context.compile(lambda d: {"s": d["x"].sum(), "v": d["x"] + 0},
                         {"x": torch.arange(6.0)}, storage.path(tmp_path / "f"))
    out = fn({"x": torch.arange(6.0)})
    assert out["s"].item() == 15.0 and out["v"][-1].item() == 5.0
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d TensorProxy"):
        len(out["s"])
    context.close()
