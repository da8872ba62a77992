"""The ops timm's model families need, captured and interpreted against torch eager (property
tests): the mobile activations and their in-place forms with the backward ops autograd emits
for them, adaptive max pooling and its backward, and ``as_strided(_)`` where it is a view of a
tensor's own elements (timm's adaptive pooling of a ``channels_last`` tensor traces to it).

Tolerance: each IR op's reference is torch's own kernel, so values agree to the bit
(``assert_close``'s float32 default, ``rtol=1.3e-6, atol=1e-5``, is far looser than needed);
``silu_`` goes through torch's decomposition (``x * sigmoid(x)``), an ulp from its kernel.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from mncore_compiler.aten import decomposition_table
from mncore_compiler.capture import capture
from mncore_compiler.errors import UnsupportedOperationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.passes import Compilation, run_pipeline
from torch.fx.experimental.proxy_tensor import make_fx

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
aten = torch.ops.aten


def _check(fn, inputs, what: str) -> None:
    graph = run_pipeline(Compilation(capture(fn, inputs))).graph
    got = interpret(graph, inputs)
    for name, value in fn(inputs).items():
        torch.testing.assert_close(got[name], value, msg=lambda m, n=name: f"{n} {what}: {m}")


def _data(seed: int, shape) -> torch.Tensor:
    # Spread over the activations' breakpoints (+-3 for hardswish/hardsigmoid, 0, the clamp
    # bounds), with some values exactly on them.
    g = torch.Generator().manual_seed(seed)
    x = 4 * torch.randn(tuple(shape), generator=g)
    flat = x.view(-1)
    points = torch.tensor([-3.0, 3.0, 0.0, -1.0, 1.0, 6.0])
    flat[: min(6, flat.numel())] = points[: min(6, flat.numel())]
    return x


# name -> (forward of x, its in-place form, the backward aten emits for it: (grad, x) -> dx)
ACTIVATIONS = {
    "hardswish": (F.hardswish, lambda x: F.hardswish(x, inplace=True),
                  lambda g, x: aten.hardswish_backward(g, x)),
    "hardsigmoid": (F.hardsigmoid, lambda x: F.hardsigmoid(x, inplace=True),
                    lambda g, x: aten.hardsigmoid_backward(g, x)),
    "hardtanh": (lambda x: F.hardtanh(x, -2.0, 1.5), lambda x: F.hardtanh(x, -2.0, 1.5, True),
                 lambda g, x: aten.hardtanh_backward(g, x, -2.0, 1.5)),
    "relu6": (F.relu6, lambda x: F.relu6(x, inplace=True),
              lambda g, x: aten.hardtanh_backward(g, x, 0.0, 6.0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2, True),
                   lambda g, x: aten.leaky_relu_backward(g, x, 0.2, False)),
    "elu": (lambda x: F.elu(x, 0.7), lambda x: F.elu(x, 0.7, True),
            lambda g, x: aten.elu_backward(g, 0.7, 1.0, 1.0, False, x)),
    "selu": (F.selu, lambda x: F.selu(x, True),
             lambda g, x: aten.elu_backward(g, 1.6732632423543772, 1.0507009873554805, 1.0,
                                            False, x)),
    "celu": (lambda x: F.celu(x, 0.6), lambda x: F.celu(x, 0.6, True),
             lambda g, x: aten.elu_backward(g, 0.6, 1.0, 1 / 0.6, False, x)),
    "mish": (F.mish, lambda x: F.mish(x, inplace=True), lambda g, x: aten.mish_backward(g, x)),
    "silu": (F.silu, lambda x: F.silu(x, inplace=True),
             lambda g, x: aten.silu_backward(g, x)),
    "relu": (F.relu, lambda x: F.relu(x, inplace=True),
             lambda g, x: aten.threshold_backward(g, F.relu(x), 0)),
    "gelu": (F.gelu, lambda x: aten.gelu_(x),
             lambda g, x: aten.gelu_backward(g, x)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: aten.gelu_(x, approximate="tanh"),
                  lambda g, x: aten.gelu_backward(g, x, approximate="tanh")),
}


@SETTINGS
@given(name=st.sampled_from(sorted(ACTIVATIONS)),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_activation_forward_in_place_and_backward_property(name: str, shape: list[int],
                                                           seed: int) -> None:
    forward, in_place, backward = ACTIVATIONS[name]

    def fn(d):
        x = d["x"] * 1.0  # in place on a temporary, as a model's activation is
        return {"y": forward(d["x"]), "y_": in_place(x), "dx": backward(d["g"], d["x"])}

    _check(fn, {"x": _data(seed, shape), "g": _data(seed + 1, shape)},
           f"{name} {shape} seed={seed}")


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradient_through_autograd(name: str) -> None:
    # The backward ops as autograd emits them (for the in-place form: on its result where
    # torch keeps only that, as leaky_relu_ and elu_ do).
    forward, in_place, _ = ACTIVATIONS[name]
    w = torch.randn(3, 4, generator=torch.Generator().manual_seed(5), requires_grad=True)

    def fn(d):
        x = d["x"] * w
        y = forward(x) + in_place(x * 0.5)
        (grad,) = torch.autograd.grad((y * d["g"]).sum(), w)
        return {"y": y.detach(), "grad": grad}

    _check(fn, {"x": _data(3, (3, 4)), "g": _data(4, (3, 4))}, name)


def test_leaky_relu_and_elu_in_place_backward_read_the_result() -> None:
    # autograd of leaky_relu_ / elu_ keeps the result, not the input (self_is_result).
    g, x = _data(1, (4, 5)), _data(2, (4, 5))

    def fn(d):
        return {"leaky": aten.leaky_relu_backward(d["g"], F.leaky_relu(d["x"], 0.3), 0.3, True),
                "elu": aten.elu_backward(d["g"], 1.2, 1.0, 1.0, True, F.elu(d["x"], 1.2))}

    _check(fn, {"g": g, "x": x}, "from the result")


@SETTINGS
@given(shape=st.lists(st.integers(1, 7), min_size=4, max_size=4),
       out=st.tuples(st.integers(1, 4), st.integers(1, 4)), seed=st.integers(0, 2**16))
def test_adaptive_max_pool_and_backward_property(shape: list[int], out: tuple[int, int],
                                                 seed: int) -> None:
    x = _data(seed, shape)
    values, indices = F.adaptive_max_pool2d(x, out, return_indices=True)
    grad = _data(seed + 1, values.shape)

    def fn(d):
        y, i = F.adaptive_max_pool2d(d["x"], out, return_indices=True)
        return {"y": y, "i": i, "dx": aten.adaptive_max_pool2d_backward(d["g"], d["x"], i)}

    _check(fn, {"x": x, "g": grad}, f"{shape} -> {out} seed={seed}")


def test_adaptive_max_pool_1d_and_its_gradient() -> None:
    w = torch.randn(2, 3, 9, generator=torch.Generator().manual_seed(7), requires_grad=True)

    def fn(d):
        y = F.adaptive_max_pool1d(d["x"] * w, 4)
        (grad,) = torch.autograd.grad(y.sum(), w)
        return {"y": y.detach(), "grad": grad}

    _check(fn, {"x": _data(8, (2, 3, 9))}, "1-d")


def _strided_input(seed: int, shape: list[int], perm: list[int]) -> torch.Tensor:
    """A tensor of ``shape`` whose memory is laid out in the dim order ``perm``."""
    dense = _data(seed, [shape[d] for d in perm]).contiguous()
    inverse = sorted(range(len(perm)), key=perm.__getitem__)
    return dense.permute(*inverse)


@st.composite
def _views(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], list[int], int]:
    """A dense input (shape and memory order) and an as_strided view of its elements: a
    reshape, another dense ordering of a contiguous run, or overlapping windows."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    perm = draw(st.permutations(range(len(shape))))
    numel = 1
    for s in shape:
        numel *= s
    kind = draw(st.sampled_from(["reshape", "permuted", "windows"]))
    if kind == "windows":
        # Windows of ``length`` elements every ``step`` (< length: they overlap).
        length = draw(st.integers(min(2, numel), numel))
        step = draw(st.integers(0, length - 1))
        count = draw(st.integers(1, (numel - length) // step + 1 if step else 3))
        return shape, perm, [count, length], [step, 1], draw(
            st.integers(0, numel - length - (count - 1) * step))
    run = draw(st.integers(1, numel))
    offset = draw(st.integers(0, numel - run))
    sizes = [run]  # factor the run into up to 3 dims
    for _ in range(2):
        divisors = [d for d in range(1, sizes[-1] + 1) if sizes[-1] % d == 0]
        d = draw(st.sampled_from(divisors))
        sizes[-1] //= d
        sizes.append(d)
    strides, acc = [0] * len(sizes), 1
    order = draw(st.permutations(range(len(sizes)))) if kind == "permuted" else range(
        len(sizes) - 1, -1, -1)
    for d in order:
        strides[d], acc = acc, acc * sizes[d]
    return shape, perm, sizes, strides, offset


@SETTINGS
@given(view=_views(), in_place=st.booleans(), seed=st.integers(0, 2**16))
def test_as_strided_property(view, in_place: bool, seed: int) -> None:
    shape, perm, size, stride, offset = view
    x = _strided_input(seed, shape, perm)

    def fn(d):
        base = d["x"] * 1.0  # keeps x's strides, as every elementwise op does
        y = (base.as_strided_(size, stride, offset) if in_place
             else base.as_strided(size, stride, offset))
        return {"y": y * 2}

    _check(fn, {"x": x}, f"{shape} order {perm} -> {size}/{stride}+{offset} seed={seed}")


# (shape, memory order, size, stride, offset): one case per way a view is emitted.
STRIDED_CASES = {
    "reshape": ([2, 3, 4], [0, 1, 2], [4, 6], [6, 1], 0),
    "reshape-of-channels-last": ([2, 3, 2, 2], [0, 2, 3, 1], [2, 12], [12, 1], 0),
    "run-from-an-offset": ([4, 5], [1, 0], [3, 4], [4, 1], 5),
    "transpose": ([3, 4], [0, 1], [4, 3], [1, 4], 0),
    "channels-last-strides": ([2, 6, 1, 1], [0, 1, 2, 3], [2, 6, 1, 1], [6, 1, 6, 6], 0),
    "overlapping-windows": ([10], [0], [3, 5], [2, 1], 1),
    "strided-steps": ([3, 4], [1, 0], [2, 3], [5, 2], 1),
    "broadcast-row": ([2, 3], [0, 1], [4, 3], [0, 1], 3),
}


@pytest.mark.parametrize("case", sorted(STRIDED_CASES))
@pytest.mark.parametrize("in_place", [False, True], ids=["view", "in-place"])
def test_as_strided_cases(case: str, in_place: bool) -> None:
    shape, perm, size, stride, offset = STRIDED_CASES[case]
    x = _strided_input(11, shape, perm)

    def fn(d):
        base = d["x"] * 1.0
        y = (base.as_strided_(size, stride, offset) if in_place
             else base.as_strided(size, stride, offset))
        return {"y": y * 2}

    _check(fn, {"x": x}, case)


def test_channels_last_adaptive_pooling_traces_to_as_strided_and_trains() -> None:
    x = _strided_input(3, [2, 5, 4, 3], [0, 2, 3, 1])  # channels_last
    assert x.is_contiguous(memory_format=torch.channels_last)
    w = torch.randn(2, 5, 4, 3, generator=torch.Generator().manual_seed(4), requires_grad=True)

    def pool(d):
        return 0.5 * (F.adaptive_avg_pool2d(d["x"] * 1.0, 1) + F.adaptive_max_pool2d(d["x"], 1))

    traced = make_fx(pool, decomposition_table=decomposition_table())({"x": x})
    assert "aten.as_strided_.default" in [str(n.target) for n in traced.graph.nodes]

    def fn(d):
        y = F.adaptive_avg_pool2d(d["x"] * w.contiguous(memory_format=torch.channels_last), 1)
        (grad,) = torch.autograd.grad((y * y).sum(), w)
        return {"pool": pool(d), "y": y.detach(), "grad": grad}

    _check(fn, {"x": x}, "channels_last")


def test_as_strided_past_its_own_elements_is_a_clear_error() -> None:
    def fn(d):
        # The first row is a view of all of x's storage: torch reads the second row too.
        return {"y": (d["x"] * 1.0)[:1].as_strided((2, 3), (3, 1))}

    with pytest.raises(UnsupportedOperationError, match=r"reads past the 3 elements"):
        capture(fn, {"x": torch.randn(2, 3)})


def test_as_strided_of_a_strided_view_is_a_clear_error() -> None:
    def fn(d):
        return {"y": (d["x"] * 1.0)[:, ::2].as_strided((2, 2), (1, 2))}

    with pytest.raises(UnsupportedOperationError, match=r"itself a strided view"):
        capture(fn, {"x": torch.randn(2, 4)})
