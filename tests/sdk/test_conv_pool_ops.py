"""Convolution, pooling, group norm and nearest upsampling, forward and backward, compiled with
``Context.compile`` on ``mncore2:auto``, against torch eager: a seeded sweep of shapes that
includes sizes of 1, odd sizes, strides, padding, dilation, groups and broadcasting biases.

Tolerance: the IR references are torch's own kernels, so convolution and pooling agree to
float32 rounding (``rtol=1e-5, atol=1e-5``); group norm is composed of IR sums in float32
where torch keeps its per-group sums in a wider accumulator, an ulp or so apart.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mlsdk import Context, MNDevice, storage

RTOL, ATOL = 1e-5, 1e-5
SEED = 2323
aten = torch.ops.aten


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _check(tmp_path, fn, inputs: dict[str, torch.Tensor], label: str) -> None:
    expected = fn(inputs)
    with Context(MNDevice("mncore2:auto")) as context:
        compiled = context.compile(fn, inputs, storage.path(tmp_path / "fn"))
        got = compiled(inputs)
        for key, value in expected.items():
            torch.testing.assert_close(got[key].cpu(), value, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, key=key: f"{label} {key} seed={SEED}: {m}")


# (input shape, weight shape, stride, padding, dilation, groups, bias)
CONVS = [
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1, False),
    ((2, 3, 7, 5), (4, 3, 3, 3), 1, 1, 1, 1, True),
    ((3, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2, True),
    ((2, 6, 5, 5), (6, 1, 3, 3), 2, 1, 1, 6, False),  # depthwise
    ((1, 5, 4, 6), (7, 5, 1, 1), 2, 0, 1, 1, True),  # 1x1 shortcut
    ((2, 3, 11), (5, 3, 3), 2, 2, 2, 1, True),  # conv1d
    ((1, 4, 7), (4, 1, 5), 1, 2, 1, 4, False),  # depthwise conv1d
    ((3, 2, 1), (3, 2, 1), 1, 0, 1, 1, True),
]


@pytest.mark.parametrize("case", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_convolution_and_backward(tmp_path, case) -> None:
    shape, wshape, stride, padding, dilation, groups, bias = case
    spatial = len(shape) - 2
    conv = F.conv1d if spatial == 1 else F.conv2d

    def per_dim(v: int | tuple[int, ...]) -> list[int]:
        return [v] * spatial if isinstance(v, int) else list(v)

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        b = d.get("b")
        y = conv(d["x"], d["w"], b, stride, padding, dilation, groups)
        dx, dw, db = aten.convolution_backward(
            d["dy"], d["x"], d["w"], [wshape[0]] if bias else None, per_dim(stride),
            per_dim(padding), per_dim(dilation), False, [0] * spatial, groups,
            [True, True, bias])
        out = {"y": y, "dx": dx, "dw": dw}
        return {**out, "db": db} if bias else out

    inputs = {"x": _randn(*shape, seed=SEED), "w": _randn(*wshape, seed=SEED + 1)}
    if bias:
        inputs["b"] = _randn(wshape[0], seed=SEED + 2)
    out_shape = conv(inputs["x"], inputs["w"], None, stride, padding, dilation, groups).shape
    inputs["dy"] = _randn(*out_shape, seed=SEED + 3)
    _check(tmp_path, fn, inputs, f"conv {case}")


# (input shape, kernel, stride, padding, ceil_mode)
POOLS = [
    ((1, 1, 1, 1), 1, 1, 0, False),
    ((2, 3, 6, 6), 2, 2, 0, False),
    ((1, 2, 7, 5), 3, 2, 1, True),
    ((2, 1, 5, 9), (2, 3), (1, 2), (1, 1), False),
    ((3, 4, 5), 2, 1, 0, True),  # unbatched [C, H, W]
]


@pytest.mark.parametrize("case", POOLS, ids=[f"pool{i}" for i in range(len(POOLS))])
def test_max_and_avg_pool_and_backward(tmp_path, case) -> None:
    shape, kernel, stride, padding, ceil = case

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        x, dy = d["x"], d["dy"]
        m, idx = aten.max_pool2d_with_indices(x, kernel, stride, padding, 1, ceil)
        dm = aten.max_pool2d_with_indices_backward(dy, x, kernel, stride, padding, 1, ceil, idx)
        a = F.avg_pool2d(x, kernel, stride, padding, ceil, count_include_pad=False)
        da = aten.avg_pool2d_backward(dy, x, kernel, stride, padding, ceil, False, None)
        a2 = F.avg_pool2d(x, kernel, stride, padding, ceil, True, divisor_override=3)
        return {"m": m, "idx": idx, "dm": dm, "a": a, "da": da, "a2": a2}

    x = _randn(*shape, seed=SEED)
    dy = _randn(*F.max_pool2d(x, kernel, stride, padding, ceil_mode=ceil).shape, seed=SEED + 1)
    _check(tmp_path, fn, {"x": x, "dy": dy}, f"pool {case}")


@pytest.mark.parametrize(("shape", "size"), [((1, 1, 1, 1), (1, 1)), ((2, 3, 7, 5), (3, 2)),
                                             ((1, 2, 4, 6), (2, 3)), ((2, 5, 3), (3, 1))])
def test_adaptive_avg_pool_and_backward(tmp_path, shape, size) -> None:
    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        y = aten._adaptive_avg_pool2d(d["x"], list(size))
        return {"y": y, "dx": aten._adaptive_avg_pool2d_backward(d["dy"], d["x"])}

    x = _randn(*shape, seed=SEED)
    dy = _randn(*F.adaptive_avg_pool2d(x, size).shape, seed=SEED + 1)
    _check(tmp_path, fn, {"x": x, "dy": dy}, f"adaptive {shape} {size}")


def test_max_pool_1d_and_global_average(tmp_path) -> None:
    # torch traces 1-d pools as the 2-d kernels over a unit dim, a global average as mean.
    fn = lambda d: {"m": F.max_pool1d(d["x"], 3, 2, 1), "a": F.avg_pool1d(d["x"], 2),  # noqa: E731
                    "g": F.adaptive_avg_pool2d(d["y"], 1)}
    _check(tmp_path, fn, {"x": _randn(2, 3, 9, seed=SEED), "y": _randn(2, 3, 5, 4, seed=SEED)},
           "pool1d")


# (shape, groups, affine)
GROUP_NORMS = [((1, 1, 1), 1, True), ((2, 4, 3, 3), 2, True), ((3, 6, 5), 3, False),
               ((2, 5, 1, 7), 5, True), ((1, 4), 1, True)]


@pytest.mark.parametrize("case", GROUP_NORMS, ids=[f"gn{i}" for i in range(len(GROUP_NORMS))])
def test_group_norm_and_backward(tmp_path, case) -> None:
    shape, groups, affine = case
    channels = shape[1]
    hxw = 1
    for d in shape[2:]:
        hxw *= d

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        w, b = (d["w"], d["b"]) if affine else (None, None)
        y, mean, rstd = aten.native_group_norm(d["x"], w, b, shape[0], channels, hxw, groups,
                                               1e-5)
        dx, dw, db = aten.native_group_norm_backward(
            d["dy"], d["x"], mean, rstd, w, shape[0], channels, hxw, groups,
            [True, affine, affine])
        out = {"y": y, "mean": mean, "rstd": rstd, "dx": dx}
        return {**out, "dw": dw, "db": db} if affine else out

    inputs = {"x": _randn(*shape, seed=SEED) * 2 + 1, "dy": _randn(*shape, seed=SEED + 1)}
    if affine:
        inputs |= {"w": _randn(channels, seed=SEED + 2), "b": _randn(channels, seed=SEED + 3)}
    _check(tmp_path, fn, inputs, f"group_norm {case}")


UPSAMPLES = [((1, 1, 1, 1), {"scale_factor": 2}), ((2, 3, 3, 2), {"size": (7, 5)}),
             ((1, 2, 5), {"scale_factor": 3}), ((2, 1, 4), {"size": 6}),
             ((1, 1, 3, 5), {"scale_factor": (1.5, 0.6)})]


@pytest.mark.parametrize(("shape", "how"), UPSAMPLES,
                         ids=[f"up{i}" for i in range(len(UPSAMPLES))])
def test_upsample_nearest_and_backward(tmp_path, shape, how) -> None:
    x = _randn(*shape, seed=SEED)
    out_shape = F.interpolate(x, mode="nearest", **how).shape
    dy = _randn(*out_shape, seed=SEED + 1)

    fn = lambda d: {"y": F.interpolate(d["x"], mode="nearest", **how)}  # noqa: E731
    _check(tmp_path, fn, {"x": x}, f"upsample {shape} {how}")
    # The backward, as torch traces it: the gradient summed over each source's copies.
    size, in_size = list(out_shape[2:]), list(shape)
    back = aten.upsample_nearest1d_backward if len(size) == 1 else aten.upsample_nearest2d_backward
    _check(tmp_path, lambda d: {"dx": back(d["dy"], size, in_size)}, {"dy": dy},
           f"upsample backward {shape} {how}")


def test_group_norm_module_and_combinations_compile(tmp_path) -> None:
    """nn.GroupNorm and nn.Upsample as modules, in one function with a convolution."""
    torch.manual_seed(SEED)
    gn, up = torch.nn.GroupNorm(2, 4), torch.nn.Upsample(scale_factor=2)
    conv = torch.nn.Conv2d(4, 4, 3, padding=1, groups=2)
    fn = lambda d: {"y": up(gn(conv(d["x"])))}  # noqa: E731
    _check(tmp_path, fn, {"x": _randn(2, 4, 3, 3, seed=SEED)}, "modules")



def test_transposed_convolution_compiles(tmp_path) -> None:
    # Forward and backward sweeps: tests/compiler/test_capture_zoo.py.
    w = _randn(2, 3, 3, 3, seed=SEED)
    fn = lambda d: {"y": F.conv_transpose2d(d["x"], w, stride=2, padding=1,  # noqa: E731
                                            output_padding=1)}
    _check(tmp_path, fn, {"x": _randn(1, 2, 4, 4, seed=SEED)}, "conv_transpose2d")


def test_transposed_convolution_output_padding_past_the_stride_is_refused(tmp_path) -> None:
    from mncore_compiler.errors import UnsupportedOperationError

    w = _randn(2, 3, 3, 3, seed=SEED)
    with Context(MNDevice("mncore2:auto")) as context, pytest.raises(
            UnsupportedOperationError, match=r"output_padding=\[1, 1\] not smaller than stride"):
        context.compile(lambda d: {"y": F.conv_transpose2d(d["x"], w, output_padding=1,
                                                           dilation=2)},
                        {"x": _randn(1, 2, 4, 4, seed=SEED)}, storage.path(tmp_path / "fn"))


@pytest.mark.parametrize(("types", "attrs", "message"), [
    ([((1, 2, 5, 5), "int64"), ((3, 2, 3, 3), "int64")], {},
     "conv takes floating-point operands, got int64"),
    ([((1, 2, 5, 5), "float32"), ((3, 2, 3, 3), "float32")], {"stride": (0, 1)},
     r"stride must be a list of 2 ints >= 1, not \(0, 1\)"),
    ([((1, 2, 5), "float32"), ((3, 2, 3), "float32")], {"padding": (1, 1)},
     r"padding must be a list of 1 ints >= 0, not \(1, 1\)"),
    ([((1, 2, 5, 5), "float32"), ((3, 1, 3, 3), "float32")], {},
     "conv rejects operands"),
    ([((2, 5), "float32"), ((3, 2, 3), "float32")], {},
     r"convolution takes \[N, C, L\] or \[N, C, H, W\] tensors"),
])
def test_conv_type_rule_names_what_it_expected(types, attrs, message) -> None:
    from mncore_compiler.ir import TensorType
    from mncore_compiler.ops import OpTypeError, infer_type

    spatial = len(types[0][0]) - 2 if len(types[0][0]) > 2 else 1
    base = {"stride": (1,) * spatial, "padding": (0,) * spatial, "dilation": (1,) * spatial,
            "groups": 1}
    operands = [TensorType(shape, dtype) for shape, dtype in types]
    with pytest.raises(OpTypeError, match=message):
        infer_type("conv", operands, {**base, **attrs})
