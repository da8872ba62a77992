"""Property tests of the model zoo's ops, forward and backward, captured vs torch eager:
``sort``/``argsort``/``topk``, ``cumsum``/``cumprod`` with ``dtype=``, ``histc``, ``F.pad`` in
its modes, in-place copies into ``slice``/``select`` views (and their backward, through
``as_strided`` views), funnel's relative shift, binary cross-entropy, ``sign``,
transformers' grouped expert matmul, ``baddbmm``, the rounding ops, weight normalization,
``unfold``/``fold`` (``im2col``/``col2im``), ``one_hot``, ``softplus``, bilinear upsampling
and ``triu``/``tril``.

Tolerance: float32 ``rtol=1e-5, atol=1e-5`` (torch's default for float32 is 1.3e-6/1e-5; the
backward of a sum of products may associate differently); integer results exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from mncore_compiler.capture import capture
from mncore_compiler.errors import UnsupportedOperationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.passes import Compilation, run_pipeline

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)
TensorDict = dict[str, torch.Tensor]


def _randn(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _check(fn: Callable[[TensorDict], TensorDict], inputs: TensorDict, label: str) -> None:
    graph = run_pipeline(Compilation(capture(fn, inputs))).graph
    got = interpret(graph, inputs)
    want = fn({k: v.clone() for k, v in inputs.items()})
    for name, value in want.items():
        assert got[name].dtype == value.dtype, f"{label}: {name}"
        torch.testing.assert_close(got[name], value.detach(), rtol=1e-5, atol=1e-5,
                                   msg=lambda m, n=name: f"{label} {n}: {m}")


def _with_grad(forward: Callable[..., TensorDict], weights: torch.Tensor,
               names: tuple[str, ...] = ("x",)) -> Callable[[TensorDict], TensorDict]:
    """``forward`` of the inputs ``names``, and their gradients of a weighted sum of the float
    results (so that each position's gradient differs): ``grad`` for ``x``, ``grad_<name>``
    for the others."""

    def fn(d: TensorDict) -> TensorDict:
        with torch.enable_grad():
            leaves = [d[k].detach().clone().requires_grad_(True) for k in names]
            out = forward(*leaves)
            floats = [v for v in out.values() if v.is_floating_point()]
            loss = sum((v * _spread(v.shape, weights)).sum() for v in floats)
            grads = torch.autograd.grad(loss, leaves)
        return {**{k: v.detach() for k, v in out.items()},
                **{"grad" if k == "x" else f"grad_{k}": g for k, g in zip(names, grads,
                                                                           strict=True)}}

    return fn


def _spread(shape: torch.Size, weights: torch.Tensor) -> torch.Tensor:
    """Weights of ``shape``, ``weights`` repeated as far as needed."""
    count = max(1, int(torch.Size(shape).numel()))
    reps = -(-count // weights.numel())
    return weights.flatten().repeat(reps)[:count].reshape(shape)


@st.composite
def _shape_and_dim(draw: st.DrawFn) -> tuple[tuple[int, ...], int]:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


@SETTINGS
@given(case=_shape_and_dim(), descending=st.booleans(), seed=st.integers(0, 2**16))
def test_sort_argsort_topk_property(case: tuple[tuple[int, ...], int], descending: bool,
                                    seed: int) -> None:
    shape, dim = case
    k = 1 + seed % shape[dim]

    def forward(x: torch.Tensor) -> TensorDict:
        values, indices = torch.sort(x, dim=dim, descending=descending)
        top, where = torch.topk(x, k, dim=dim, largest=descending)
        return {"values": values, "indices": indices, "top": top, "where": where,
                "order": torch.argsort(x, dim=dim, descending=descending)}

    x = _randn(seed, shape)  # continuous values: no ties, one right order
    _check(_with_grad(forward, _randn(seed + 1, (1024,))), {"x": x},
           f"shape={shape} dim={dim} descending={descending} k={k} seed={seed}")


@SETTINGS
@given(case=_shape_and_dim(), dtype=st.sampled_from([None, torch.int32, torch.int64,
                                                     torch.float32]),
       seed=st.integers(0, 2**16))
def test_cumsum_cumprod_with_dtype_property(case: tuple[tuple[int, ...], int],
                                            dtype: torch.dtype | None, seed: int) -> None:
    shape, dim = case
    g = torch.Generator().manual_seed(seed)
    ints = torch.randint(-3, 4, shape, generator=g, dtype=torch.int32)

    def fn(d: TensorDict) -> TensorDict:
        return {"sum": torch.cumsum(d["i"], dim, dtype=dtype),
                "prod": torch.cumprod(d["i"], dim, dtype=dtype),
                "fsum": torch.cumsum(d["x"], dim, dtype=torch.float32)}

    _check(fn, {"i": ints, "x": _randn(seed, shape)}, f"{shape} dim={dim} {dtype} seed={seed}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cumsum_cumprod_backward(seed: int) -> None:
    weights = _randn(seed + 1, (64,))
    _check(_with_grad(lambda x: {"s": x.cumsum(1), "p": x.cumprod(0)}, weights),
           {"x": _randn(seed, (3, 4)) + 2}, f"seed={seed}")


@SETTINGS
@given(bins=st.integers(1, 9), bounds=st.sampled_from([(0.0, 0.0), (-1.0, 1.0), (0.0, 3.0)]),
       seed=st.integers(0, 2**16))
def test_histc_property(bins: int, bounds: tuple[float, float], seed: int) -> None:
    low, high = bounds
    _check(lambda d: {"h": torch.histc(d["x"], bins=bins, min=low, max=high)},
           {"x": _randn(seed, (4, 5))}, f"bins={bins} {bounds} seed={seed}")


@st.composite
def _pads(draw: st.DrawFn, mode: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rank = draw(st.integers(3, 4))  # (N, C, W) or (N, C, H, W): the modes' batch layouts
    shape = tuple(draw(st.integers(3, 5)) for _ in range(rank))
    padded = rank - 2 if mode != "constant" else draw(st.integers(1, rank))
    low = -1 if mode == "constant" else 0
    high = 2 if mode in ("reflect", "circular") else 3
    return shape, tuple(draw(st.integers(low, high)) for _ in range(2 * padded))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_pad_modes_property(mode: str, data: st.DataObject, seed: int) -> None:
    shape, pad = data.draw(_pads(mode))
    value = {"value": 0.25} if mode == "constant" else {}
    forward = _with_grad(lambda x: {"y": F.pad(x, pad, mode=mode, **value)},
                         _randn(seed + 1, (1024,)))
    _check(forward, {"x": _randn(seed, shape)}, f"{mode} {shape} pad={pad} seed={seed}")


def test_pad_of_an_integer_tensor_keeps_its_dtype() -> None:
    labels = torch.arange(6).reshape(2, 3)
    _check(lambda d: {"y": F.pad(d["x"], (0, 1), value=-100)}, {"x": labels}, "labels")


def _shift_right(d: TensorDict) -> TensorDict:
    # T5's _shift_right: copies into a slice and a select of a fresh tensor, then a masked fill.
    ids = d["ids"]
    shifted = ids.new_zeros(ids.shape)
    shifted[..., 1:] = ids[..., :-1].clone()
    shifted[..., 0] = 7
    shifted.masked_fill_(shifted == -100, 0)
    return {"shifted": shifted}


def _into_views(x: torch.Tensor) -> TensorDict:
    y = x.clone()
    y[:, 1] = x[:, 0] * 2
    y[0, ::2] += 1
    view = y.view(4, 3)
    view[1:, 1:3] = view[1:, 1:3] * 0.5
    y.narrow(0, 2, 1).copy_(x[:1] - 1)
    return {"y": y}


def test_copies_into_slice_and_select_views() -> None:
    ids = torch.tensor([[5, -100, 9, 3], [1, 2, -100, -100]])
    _check(_shift_right, {"ids": ids}, "shift_right")
    _check(lambda d: _into_views(d["x"]), {"x": _randn(2, (3, 4))}, "views")
    # Autograd's backward of in-place writes into views writes through as_strided views.
    _check(_with_grad(_into_views, _randn(3, (64,))), {"x": _randn(2, (3, 4))}, "views grad")


@SETTINGS
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 5),
                       st.integers(2, 9)), data=st.data(), seed=st.integers(0, 2**16))
def test_relative_shift_forward_and_backward(shape: tuple[int, int, int, int],
                                             data: st.DataObject, seed: int) -> None:
    # Funnel's _relative_shift_gather: reshape, slice, reshape of a non-contiguous slice; its
    # backward writes the gradient through an as_strided view of a fresh tensor.
    batch, heads, seq, rel = shape
    shift = data.draw(st.integers(1, rel - 1))
    context = data.draw(st.integers(1, rel - shift))

    def forward(x: torch.Tensor) -> TensorDict:
        y = x.reshape(batch, heads, rel, seq)[:, :, shift:, :]
        y = y.reshape(batch, heads, seq, rel - shift)[..., :context]
        return {"y": y.tanh()}

    _check(_with_grad(forward, _randn(seed + 1, (64,))), {"x": _randn(seed, shape)}, "shift")


def test_writes_through_an_as_strided_view() -> None:
    def write(stride: tuple[int, int], offset: int) -> Callable[[TensorDict], TensorDict]:
        def fn(d: TensorDict) -> TensorDict:
            z = d["x"].new_zeros(8)
            z.as_strided((2, 3), stride, offset).copy_(d["x"] * 2)
            return {"z": z + 1}
        return fn

    x = _randn(9, (2, 3))
    _check(write((1, 2), 1), {"x": x}, "transposed")  # distinct positions, out of order
    with pytest.raises(UnsupportedOperationError, match="as_strided views of distinct"):
        capture(write((1, 1), 0), {"x": x})  # overlapping elements: torch's order is unspecified


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_forward_and_backward(reduction: str) -> None:
    target = (_randn(5, (4, 3)) > 0).float()
    weight, pos = _randn(6, (3,)).abs(), _randn(7, (3,)).abs() + 0.5

    def forward(x: torch.Tensor) -> TensorDict:
        return {"logits": F.binary_cross_entropy_with_logits(x, target, weight=weight,
                                                             pos_weight=pos,
                                                             reduction=reduction),
                "probs": F.binary_cross_entropy(torch.sigmoid(x), target, reduction=reduction)}

    _check(_with_grad(forward, _randn(8, (64,))), {"x": _randn(4, (4, 3)) * 3}, reduction)


def test_sign_and_sgn_and_the_backward_of_abs() -> None:
    x = torch.tensor([[-2.0, 0.0, 3.5], [1e-3, -0.0, -7.0]])
    ints = torch.tensor([-3, 0, 4], dtype=torch.int32)
    _check(lambda d: {"sign": torch.sign(d["x"]), "sgn": torch.sgn(d["x"]),
                      "int": torch.sign(d["i"])}, {"x": x, "i": ints}, "sign")
    _check(_with_grad(lambda v: {"abs": v.abs()}, _randn(1, (64,))), {"x": x}, "abs")


@pytest.mark.parametrize("counts", [[2, 0, 3], [0, 0, 5], [1, 1, 1]])
def test_grouped_expert_matmul_forward_and_backward(counts: list[int]) -> None:
    transformers = pytest.importorskip("transformers", reason="the op is transformers'")
    from transformers.integrations import moe  # registers transformers.grouped_mm_fallback

    assert transformers is not None and moe is not None
    rows = sum(counts) + 1  # one row past the last offset: no group's, zero in torch too
    weight = torch.nn.Parameter(_randn(1, (3, 4, 2)))
    offsets = torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    weights = _randn(2, (rows, 2))

    def fn(d: TensorDict) -> TensorDict:
        with torch.enable_grad():
            x = d["x"].detach().clone().requires_grad_(True)
            out = torch.ops.transformers.grouped_mm_fallback(x, weight, d["offs"])
            loss = (out * weights).sum()
            gx, gw = torch.autograd.grad(loss, [x, weight])
        return {"out": out.detach(), "gx": gx, "gw": gw}

    _check(fn, {"x": _randn(0, (rows, 4)), "offs": offsets}, f"counts={counts}")


@SETTINGS
@given(batch=st.integers(1, 3), dims=st.tuples(st.integers(1, 4), st.integers(1, 4),
                                               st.integers(1, 4)),
       scale=st.sampled_from([(1.0, 1.0), (0.5, 2.0), (0.0, 0.125), (-1.0, 1.0)]),
       broadcast=st.booleans(), seed=st.integers(0, 2**16))
def test_baddbmm_property(batch: int, dims: tuple[int, int, int], scale: tuple[float, float],
                          broadcast: bool, seed: int) -> None:
    (m, k, n), (beta, alpha) = dims, scale
    bias = (1, m, n) if broadcast else (batch, m, n)  # bloom's alibi bias broadcasts
    inputs = {"x": _randn(seed, bias), "a": _randn(seed + 1, (batch, m, k)),
              "b": _randn(seed + 2, (batch, k, n))}
    forward = _with_grad(lambda x, a, b: {"y": torch.baddbmm(x, a, b, beta=beta, alpha=alpha)},
                         _randn(seed + 3, (256,)), ("x", "a", "b"))
    _check(forward, inputs, f"{bias} {dims} beta={beta} alpha={alpha} seed={seed}")


@pytest.mark.parametrize("op", [torch.floor, torch.ceil, torch.trunc, torch.round])
def test_rounding_ops_forward_and_backward(op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    # Halves and integers included: round goes half to even; -0.0 keeps its sign.
    x = torch.tensor([[-2.5, -1.5, -0.5, -0.0], [0.5, 1.5, 2.49, 3.0]]) + 0.0
    ints = torch.tensor([-3, 0, 4], dtype=torch.int32)
    _check(lambda d: {"f": op(d["x"]), "i": op(d["i"]), "s": op(d["x"] * 3.7)},
           {"x": x, "i": ints}, op.__name__)
    # The gradient through a rounding op is zero; through x * floor(x) it is floor(x).
    _check(_with_grad(lambda v: {"y": v * op(v)}, _randn(1, (64,))), {"x": _randn(0, (3, 4)) * 3},
           f"{op.__name__} backward")


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), last=st.booleans(),
       seed=st.integers(0, 2**16))
def test_weight_norm_property(shape: list[int], last: bool, seed: int) -> None:
    # torch captures _weight_norm_interface (and its backward) for dim 0 or the last dim.
    dim = len(shape) - 1 if last else 0
    g_shape = [s if i == dim else 1 for i, s in enumerate(shape)]
    forward = _with_grad(lambda v, g: {"w": torch._weight_norm(v, g, dim)},
                         _randn(seed + 2, (256,)), ("v", "g"))
    _check(forward, {"v": _randn(seed, tuple(shape)), "g": _randn(seed + 1, tuple(g_shape))},
           f"{shape} dim={dim} seed={seed}")


def test_weight_norm_module_as_wav2vec2_uses_it() -> None:
    # wav2vec2's positional convolution: weight_norm over dim 2 of a grouped Conv1d.
    conv = torch.nn.utils.parametrizations.weight_norm(
        torch.nn.Conv1d(4, 4, 3, padding=1, groups=2), name="weight", dim=2)

    def forward(x: torch.Tensor) -> TensorDict:
        return {"y": conv(x)}

    _check(_with_grad(forward, _randn(1, (64,))), {"x": _randn(0, (2, 4, 5))}, "conv")


@st.composite
def _unfold_case(draw: st.DrawFn) -> tuple[tuple[int, ...], dict[str, tuple[int, int]]]:
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    spatial = tuple(dilation[i] * (kernel[i] - 1) + 1 - 2 * padding[i] + draw(st.integers(0, 3))
                    for i in range(2))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)),
             *(max(s, 1) for s in spatial))
    return shape, {"kernel_size": kernel, "dilation": dilation, "padding": padding,
                   "stride": stride}


@SETTINGS
@given(case=_unfold_case(), seed=st.integers(0, 2**16))
def test_unfold_and_fold_property(case: tuple[tuple[int, ...], dict[str, tuple[int, int]]],
                                  seed: int) -> None:
    shape, params = case
    x = _randn(seed, shape)
    blocks = F.unfold(x, **params)
    weights = _randn(seed + 1, (1024,))
    _check(_with_grad(lambda v: {"cols": F.unfold(v, **params)}, weights), {"x": x},
           f"unfold {shape} {params}")
    _check(_with_grad(lambda v: {"img": F.fold(v, shape[2:], **params)}, weights),
           {"x": _randn(seed + 2, tuple(blocks.shape))}, f"fold {shape} {params}")


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), classes=st.integers(1, 6),
       seed=st.integers(0, 2**16))
def test_one_hot_property(shape: list[int], classes: int, seed: int) -> None:
    # Switch Transformers' router: torch's kernel reads the largest class from the values;
    # the compiled one compares each index with every class.
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, classes, tuple(shape), generator=g)
    _check(lambda d: {"y": F.one_hot(d["x"], num_classes=classes),
                      "w": F.one_hot(d["x"], classes).float() * 0.5},
           {"x": x}, f"{shape} classes={classes}")


def test_one_hot_without_num_classes_says_why() -> None:
    with pytest.raises(ValueError, match="one_hot needs num_classes="):
        capture(lambda d: {"y": F.one_hot(d["x"])}, {"x": torch.tensor([0, 2, 1])})


@SETTINGS
@given(beta=st.sampled_from([1.0, 0.5, 2.0]), threshold=st.sampled_from([20.0, 1.0, 4.0]),
       seed=st.integers(0, 2**16))
def test_softplus_forward_and_backward(beta: float, threshold: float, seed: int) -> None:
    # Mamba's time step; both sides of the threshold (x * beta above it is x itself).
    x = _randn(seed, (4, 6)) * 4
    _check(_with_grad(lambda v: {"y": F.softplus(v, beta=beta, threshold=threshold)},
                      _randn(seed + 1, (64,))), {"x": x}, f"beta={beta} threshold={threshold}")


@SETTINGS
@given(size_in=st.tuples(st.integers(1, 5), st.integers(1, 5)),
       size_out=st.tuples(st.integers(1, 9), st.integers(1, 9)), align=st.booleans(),
       by_factor=st.booleans(), seed=st.integers(0, 2**16))
def test_bilinear_upsampling_forward_and_backward(size_in: tuple[int, int],
                                                  size_out: tuple[int, int], align: bool,
                                                  by_factor: bool, seed: int) -> None:
    # MobileViT's and segmentation heads' F.interpolate(mode="bilinear"), by size or factor.
    size = {"scale_factor": (size_out[0] / size_in[0], 1.5)} if by_factor else {"size": size_out}

    def forward(x: torch.Tensor) -> TensorDict:
        return {"y": F.interpolate(x, mode="bilinear", align_corners=align, **size)}

    _check(_with_grad(forward, _randn(seed + 1, (256,))), {"x": _randn(seed, (2, 3, *size_in))},
           f"{size_in} {size} align_corners={align}")


@SETTINGS
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5)),
       diagonal=st.integers(-3, 3), seed=st.integers(0, 2**16))
def test_triu_tril_forward_and_backward(shape: tuple[int, int, int], diagonal: int,
                                        seed: int) -> None:
    # ProphetNet's causal masks, and their backward (the same mask on the gradient).
    def forward(x: torch.Tensor) -> TensorDict:
        return {"u": x.triu(diagonal) * 2, "l": torch.tril(x, diagonal).exp(),
                "i": torch.ones(shape, dtype=torch.int64).triu(diagonal)}

    _check(_with_grad(forward, _randn(seed + 1, (64,))), {"x": _randn(seed, shape)},
           f"{shape} diagonal={diagonal}")
