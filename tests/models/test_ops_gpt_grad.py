"""Indexing, layer norm, embeddings, GELU and attention on ``mncore2:auto`` against torch
eager, forward and backward (``torch.autograd.grad`` inside the compiled function, so the
backward ops are captured too): a seeded sweep over shapes with sizes 1 and odd sizes; float32
to ``rtol=1e-5, atol=1e-5`` (a backward sums several products per value)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mlsdk import storage
from mlsdk.testing.grads import with_grads

RTOL, ATOL = 1e-5, 1e-5


def _run(context, tmp_path, forward, inputs, seed):
    g = torch.Generator().manual_seed(seed + 1)
    inputs["r"] = torch.randn(forward(inputs).shape, generator=g)
    fn = with_grads(forward)
    compiled = context.compile(fn, inputs, storage.path(tmp_path / "f"))
    got, expected = compiled(inputs), fn(inputs)
    for name, value in expected.items():
        torch.testing.assert_close(got[name].cpu(), value.detach(), rtol=RTOL, atol=ATOL,
                                   msg=lambda m, n=name: f"{n}: {m}")


SHAPES = [(1, 1), (3, 5), (2, 7, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("case", ["slice", "select", "narrow", "split", "unbind",
                                  "index_select", "gather"])
def test_indexing_forward_backward(context, tmp_path, seed, shape, case):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    last = shape[-1]
    index = torch.randint(0, last, (2 * last + 1,), generator=g)
    gather_index = torch.randint(0, last, shape[:-1] + (3,), generator=g)
    forwards = {
        "slice": lambda d: d["x"][..., 1:] * 2 if last > 1 else d["x"][..., ::2],
        "select": lambda d: d["x"].select(-1, last - 1) + d["x"][0].sum(),
        "narrow": lambda d: d["x"].narrow(-1, last // 2, last - last // 2),
        "split": lambda d: torch.cat([p * (i + 1) for i, p in enumerate(d["x"].split(2, -1))],
                                     -1),
        "unbind": lambda d: torch.stack([p * (i + 1) for i, p in enumerate(d["x"].unbind(0))]),
        "index_select": lambda d: d["x"].index_select(-1, d["i"]),
        "gather": lambda d: d["x"].gather(-1, d["j"]),
    }
    _run(context, tmp_path, forwards[case], {"x": x, "i": index, "j": gather_index}, seed)


@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize("shape", [(1,), (3, 5), (2, 3, 4)], ids=str)
def test_embedding_forward_backward(context, tmp_path, seed, shape, padding_idx):
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(7, 3, generator=g)
    idx = torch.randint(0, 7, shape, generator=g)  # repeats: rows accumulate
    forward = lambda d: F.embedding(d["idx"], d["w"], padding_idx=padding_idx)  # noqa: E731
    _run(context, tmp_path, forward, {"w": weight, "idx": idx}, seed)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape,normalized", [((1, 1), (1,)), ((3, 5), (5,)),
                                              ((2, 3, 7), (7,)), ((2, 3, 4), (3, 4))], ids=str)
def test_layer_norm_forward_backward(context, tmp_path, seed, shape, normalized, affine):
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": torch.randn(shape, generator=g)}
    if affine:
        inputs |= {"w": torch.randn(normalized, generator=g), "b": torch.randn(normalized,
                                                                                 generator=g)}
    forward = lambda d: F.layer_norm(d["x"], normalized, d.get("w"), d.get("b"))  # noqa: E731
    _run(context, tmp_path, forward, inputs, seed)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1,), (3, 5)], ids=str)
def test_gelu_and_silu_backward(context, tmp_path, seed, shape, approximate):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    forward = lambda d: F.gelu(d["x"], approximate=approximate) + F.silu(d["x"])  # noqa: E731
    _run(context, tmp_path, forward, {"x": x}, seed)


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 5, 4), (1, 2, 7, 3)], ids=str)
def test_sdpa_forward_backward(context, tmp_path, seed, shape, mask):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=g) for _ in range(3))
    length = shape[-2]
    inputs = {"q": q, "k": k, "v": v}
    if mask == "bool":
        keep = torch.rand(length, length, generator=g) > 0.3
        inputs["m"] = keep | torch.eye(length, dtype=torch.bool)  # no row fully masked
    elif mask == "float":
        inputs["mf"] = torch.randn(1, 1, length, length, generator=g)

    def forward(d):
        attn_mask = d.get("m", d.get("mf"))
        return F.scaled_dot_product_attention(d["q"], d["k"], d["v"], attn_mask=attn_mask,
                                              is_causal=mask == "causal")

    _run(context, tmp_path, forward, inputs, seed)
