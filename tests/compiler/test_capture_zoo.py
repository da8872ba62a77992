"""Ops the model zoo needs, captured and run by the interpreter against torch eager, forward
and backward (``torch.autograd.grad`` inside the captured function): the recurrent layers'
gate splits and in-place transpose, slices (empty ones too) and their backward, transposed
convolution 1-d and 2-d, ``nll_loss2d`` (``cross_entropy`` over [N, C, H, W]) and attention
with grouped key/value heads.

Random configurations come from hypothesis (derandomized; the seed is part of each example and
printed on failure). Tolerance: float32 ``rtol=1e-5, atol=1e-5``: the interpreter runs torch's
own kernels for each IR op, but a backward sums several products per value in another order
than torch's fused kernel (a transposed convolution's gradients are convolutions, attention's
are matmuls over a recomputed softmax).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from mlsdk.testing.grads import with_grads
from mncore_compiler.capture import capture
from mncore_compiler.errors import CaptureError, UnsupportedOperationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.passes import Compilation, run_pipeline

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    phases=[Phase.explicit, Phase.generate])  # a failure is printed unshrunk
RTOL = ATOL = 1e-5
TensorDict = dict[str, torch.Tensor]


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _check(forward: Callable[[TensorDict], torch.Tensor], inputs: TensorDict, seed: int,
           grads: bool = True) -> list[str]:
    """Capture (with gradients unless ``grads`` is False), run before and after the passes,
    compare with eager; return the captured graph's op names."""
    if grads:
        inputs = {**inputs, "r": _randn(seed + 1, *forward(inputs).shape)}
        fn = with_grads(forward)
    else:
        fn = lambda d: {"y": forward(d)}  # noqa: E731
    graph = capture(fn, inputs)
    expected = fn(inputs)
    lowered = run_pipeline(Compilation(graph)).graph
    for label, candidate in (("captured", graph), ("lowered", lowered)):
        got = interpret(candidate, inputs)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name], value.detach(), rtol=RTOL, atol=ATOL,
                msg=lambda m, n=name, lab=label: f"{lab} {n} seed={seed}: {m}")
    return [node.op for node in graph.nodes]


# -- recurrent layers' pieces -------------------------------------------------------------------


@SETTINGS
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
       seed=st.integers(0, 2**16))
def test_unsafe_split_and_chunk(shape: list[int], data: st.DataObject, seed: int) -> None:
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = data.draw(st.integers(1, shape[dim]))
    chunks = data.draw(st.integers(1, shape[dim]))

    def forward(d: TensorDict) -> torch.Tensor:
        parts = torch.ops.aten.unsafe_split.Tensor(d["x"], size, dim)
        pieces = torch.ops.aten.unsafe_chunk.default(d["x"] * 2, chunks, dim)
        split = torch.cat([p * (i + 1) for i, p in enumerate(parts)], dim)
        return split + torch.cat([p.tanh() for p in pieces], dim)

    ops = _check(forward, {"x": _randn(seed, *shape)}, seed)
    assert "slice" in ops or (size >= shape[dim] and chunks == 1)


@SETTINGS
@given(cols=st.integers(1, 6), data=st.data(), seed=st.integers(0, 2**16))
def test_slices_and_their_backward_empty_ones_too(cols: int, data: st.DataObject,
                                                  seed: int) -> None:
    # phi3's partial rotary embedding splits the head into x[..., :d] and x[..., d:], the
    # second empty when d is the whole head: its backward adds nothing.
    start = data.draw(st.integers(-cols - 1, cols + 1))
    end = data.draw(st.integers(-cols - 1, cols + 1))
    step = data.draw(st.integers(1, 3))

    def forward(d: TensorDict) -> torch.Tensor:
        x = d["x"]
        part = x[..., start:end:step]
        return torch.cat([x.tanh(), part * 3, x[..., 0:0]], -1) * 2

    _check(forward, {"x": _randn(seed, 2, 3, cols)}, seed)


@pytest.mark.parametrize("dims", [(0, 1), (1, 2), (-1, 0), (2, 2)])
def test_transpose_in_place_gives_the_tensor_the_view_shape(dims: tuple[int, int]) -> None:
    def forward(d: TensorDict) -> torch.Tensor:
        y = d["x"] * 2
        y.transpose_(*dims)
        return y.sigmoid() * d["w"]

    x = _randn(1, 2, 3, 4)
    w = _randn(2, *x.transpose(*dims).shape)
    ops = _check(forward, {"x": x, "w": w}, 3)
    assert ("permute" in ops) == (dims[0] % 3 != dims[1] % 3)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_recurrent_layers_are_captured_as_cells(cell: str) -> None:
    # On the CPU in float32 torch's LSTM would call oneDNN's fused mkldnn_rnn_layer; capture
    # traces the cell decomposition instead, so neither direction needs that op.
    torch.manual_seed(7)
    layer = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[cell](
        3, 5, num_layers=2, batch_first=True, bidirectional=True)
    ops = _check(lambda d: layer(d["x"])[0], {"x": _randn(5, 2, 4, 3)}, 5)
    assert "matmul" in ops and "sigmoid" in ops or cell == "rnn"
    assert torch.backends.mkldnn.enabled  # the trace's setting was put back


# -- transposed convolution ---------------------------------------------------------------------


@st.composite
def conv_transpose_case(draw: st.DrawFn) -> dict[str, object]:
    spatial = draw(st.integers(1, 2))
    groups = draw(st.integers(1, 2))
    stride = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 2))
    kernel = draw(st.integers(1, 3))
    return {
        "spatial": spatial, "groups": groups, "stride": stride, "dilation": dilation,
        "kernel": kernel, "padding": draw(st.integers(0, dilation * (kernel - 1))),
        "output_padding": draw(st.integers(0, stride - 1)),
        "c_in": groups * draw(st.integers(1, 2)), "c_out": groups * draw(st.integers(1, 2)),
        "length": draw(st.integers(1, 4)), "batch": draw(st.integers(1, 2)),
        "bias": draw(st.booleans()),
    }


@SETTINGS
@given(case=conv_transpose_case(), seed=st.integers(0, 2**16))
def test_conv_transpose_forward_backward(case: dict[str, int], seed: int) -> None:
    spatial = case["spatial"]
    x = _randn(seed, case["batch"], case["c_in"], *[case["length"] + i for i in range(spatial)])
    w = _randn(seed + 2, case["c_in"], case["c_out"] // case["groups"],
               *[case["kernel"]] * spatial)
    inputs = {"x": x, "w": w}
    if case["bias"]:
        inputs["b"] = _randn(seed + 3, case["c_out"])
    fn = F.conv_transpose1d if spatial == 1 else F.conv_transpose2d

    def forward(d: TensorDict) -> torch.Tensor:
        return fn(d["x"], d["w"], d.get("b"), stride=case["stride"], padding=case["padding"],
                  output_padding=case["output_padding"], groups=case["groups"],
                  dilation=case["dilation"])

    try:
        forward(inputs)
    except RuntimeError:  # an output size below 1: torch refuses the configuration itself
        return
    ops = _check(forward, inputs, seed)
    assert "conv_input_grad" in ops and "conv_weight_grad" in ops, ops


def test_conv_transpose_module_in_eval() -> None:
    torch.manual_seed(3)
    up = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    _check(lambda d: up(d["x"]), {"x": _randn(4, 2, 4, 5, 3)}, 4, grads=False)


def test_conv_transpose_output_padding_beyond_the_stride_is_refused() -> None:
    # torch allows output_padding < dilation too; the adjoint convolution would then map the
    # output onto one more input position than x has.
    inputs = {"x": _randn(1, 1, 2, 5), "w": _randn(2, 2, 3, 3)}
    with pytest.raises(UnsupportedOperationError, match=r"output_padding=\[1\].*stride=\[1\]"):
        capture(lambda d: {"y": F.conv_transpose1d(d["x"], d["w"], output_padding=1,
                                                   dilation=2)}, inputs)


# -- per-pixel cross-entropy --------------------------------------------------------------------


@SETTINGS
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
       reduction=st.sampled_from(["mean", "sum", "none"]), ignore=st.booleans(),
       smoothing=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 2**16))
def test_cross_entropy_over_pixels(shape: tuple[int, int, int, int], reduction: str,
                                   ignore: bool, smoothing: float, seed: int) -> None:
    batch, classes, height, width = shape
    target = torch.randint(0, classes, (batch, height, width),
                           generator=torch.Generator().manual_seed(seed))
    ignore_index = int(target[0, 0, 0]) if ignore else -100

    def forward(d: TensorDict) -> torch.Tensor:
        return F.cross_entropy(d["x"], d["t"], reduction=reduction, ignore_index=ignore_index,
                               label_smoothing=smoothing)

    if ignore and bool((target == ignore_index).all()) and reduction == "mean":
        return  # every pixel ignored: torch's mean is 0 / 0
    ops = _check(forward, {"x": _randn(seed, *shape), "t": target}, seed)
    assert "nll_loss" in ops


# -- grouped-query attention --------------------------------------------------------------------


@SETTINGS
@given(heads=st.sampled_from([(4, 2), (4, 1), (6, 3), (2, 2)]), causal=st.booleans(),
       lengths=st.tuples(st.integers(1, 5), st.integers(1, 5)), batch=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_attention_with_grouped_heads(heads: tuple[int, int], causal: bool,
                                      lengths: tuple[int, int], batch: int, seed: int) -> None:
    query_heads, key_heads = heads
    length, source = lengths
    if causal:
        source = length  # torch's causal mask is the top-left triangle: same lengths here
    # Values as wide as the keys: torch's CPU flash kernel (the op captured) takes only that;
    # other widths go through its math path (``tril``, ``repeat_interleave``).
    inputs = {"q": _randn(seed, batch, query_heads, length, 8),
              "k": _randn(seed + 2, batch, key_heads, source, 8),
              "v": _randn(seed + 3, batch, key_heads, source, 8)}

    def forward(d: TensorDict) -> torch.Tensor:
        return F.scaled_dot_product_attention(d["q"], d["k"], d["v"], is_causal=causal,
                                              enable_gqa=True)

    _check(forward, inputs, seed)


def test_attention_heads_that_do_not_group_are_refused() -> None:
    inputs = {"q": _randn(1, 1, 3, 4, 8), "k": _randn(2, 1, 2, 4, 8), "v": _randn(3, 1, 2, 4, 8)}
    with pytest.raises((UnsupportedOperationError, RuntimeError), match="head"):
        capture(lambda d: {"y": F.scaled_dot_product_attention(d["q"], d["k"], d["v"],
                                                               enable_gqa=True)}, inputs)


def test_a_zero_width_weight_concatenated_and_trained() -> None:
    # MobileBERT's prediction head concatenates a weight of hidden - embedding columns, none in
    # a tiny config: an operand of no elements adds nothing, and its update writes nothing.
    empty = torch.zeros(0, 4, requires_grad=True)

    def forward(d: TensorDict) -> torch.Tensor:
        return torch.cat([d["x"], empty * 3], 0).tanh()

    ops = _check(forward, {"x": _randn(4, 3, 4)}, 4)
    assert "cat" not in ops
    with pytest.raises(CaptureError, match=r"constant '.*' has zero elements \(shape \(0, 4\)\)"):
        run_pipeline(Compilation(capture(lambda d: {"y": d["x"].sum() + empty.sum()},
                                         {"x": _randn(5, 3)})))


def test_an_update_of_no_elements_writes_nothing() -> None:
    # MobileBERT's zero-width weight of a tiny config: its optimizer update has nothing to
    # store, so it is no state write (whose output would be an empty tensor).
    from mncore_compiler.capture import capture_step

    empty, full = torch.zeros(0, 4), torch.ones(3)

    def step(d: TensorDict) -> TensorDict:
        empty.add_(1.0)
        full.add_(d["x"].sum())
        return {"y": d["x"] * 2}

    captured = capture_step(step, {"x": _randn(6, 3)},
                            registered={id(empty): "empty", id(full): "full"})
    assert list(captured.state_writes) == ["full"]
    assert torch.equal(full, torch.ones(3))  # the trace put the user's tensors back
