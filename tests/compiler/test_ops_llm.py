"""The ops language models need, captured against torch eager: tensor-indexed reads and writes
(``x[i, :, j]``, ``x[i] = v``, ``index_copy``), ``repeat``, ``cat`` onto an empty cache, and
attention whose mask hides a whole row (a left-padded query)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from mncore_compiler.capture import capture
from mncore_compiler.errors import UnsupportedOperationError
from mncore_compiler.interpreter import interpret
from mncore_compiler.passes import Compilation, run_pipeline

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def _check(fn, inputs, what: str) -> None:
    graph = run_pipeline(Compilation(capture(fn, inputs))).graph
    got = interpret(graph, inputs)
    for name, value in fn(inputs).items():
        torch.testing.assert_close(got[name], value, msg=lambda m, n=name: f"{n} {what}: {m}")


def _randn(seed: int, shape) -> torch.Tensor:
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed))


def _index(seed: int, size: int, shape) -> torch.Tensor:
    # Both signs: torch counts a negative index from the end, and so must the device.
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-size, size, tuple(shape), generator=g)


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), data=st.data(),
       seed=st.integers(0, 2**16))
def test_index_tensor_property(shape: list[int], data: st.DataObject, seed: int) -> None:
    dims = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1, max_size=2)))
    index_shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
    x = _randn(seed, shape)
    indices = {f"i{d}": _index(seed + d, shape[d], index_shape) for d in dims}

    def fn(d):
        key = tuple(d.get(f"i{k}", slice(None)) for k in range(max(dims) + 1))
        return {"y": d["x"][key]}

    _check(fn, {"x": x, **indices}, f"{shape} dims={dims} seed={seed}")


@SETTINGS
@given(shape=st.lists(st.integers(2, 4), min_size=2, max_size=3), dim=st.integers(0, 2),
       accumulate=st.booleans(), seed=st.integers(0, 2**16))
def test_index_put_property(shape: list[int], dim: int, accumulate: bool, seed: int) -> None:
    dim %= len(shape)
    # Distinct positions: with repeats and no accumulate, which write lands is unspecified.
    g = torch.Generator().manual_seed(seed)
    count = min(2, shape[dim])
    index = torch.randperm(shape[dim], generator=g)[:count]
    values = _randn(seed + 1, shape[:dim] + [count] + shape[dim + 1:])

    def fn(d):
        key = [None] * dim + [d["i"]]  # None: a whole dim, as x[:, i] traces
        return {"y": torch.ops.aten.index_put(d["x"], key, d["v"], accumulate)}

    _check(fn, {"x": _randn(seed, shape), "i": index, "v": values},
           f"{shape} dim={dim} accumulate={accumulate} seed={seed}")


@SETTINGS
@given(batch=st.integers(1, 2), heads=st.integers(1, 3), length=st.integers(2, 6),
       seed=st.integers(0, 2**16), data=st.data())
def test_static_cache_write_property(batch: int, heads: int, length: int, seed: int,
                                     data: st.DataObject) -> None:
    # gpt-fast's and Hugging Face's StaticCache write: the new K rows at the cache position,
    # in place (index_copy_) and through indexing (k[:, :, pos] = new).
    new = data.draw(st.integers(1, length))
    position = torch.arange(new) + data.draw(st.integers(0, length - new))
    k = torch.zeros(batch, heads, length, 4)
    fresh = _randn(seed, (batch, heads, new, 4))

    def fn(d):
        copied = k.clone().index_copy_(2, d["pos"], d["new"])
        put = k.clone()
        put[:, :, d["pos"]] = d["new"] * 2
        return {"copied": copied, "put": put}

    _check(fn, {"pos": position, "new": fresh}, f"length={length} new={new} seed={seed}")


@SETTINGS
@given(shape=st.lists(st.integers(1, 3), min_size=0, max_size=3),
       repeats=st.lists(st.integers(1, 3), min_size=3, max_size=4), seed=st.integers(0, 2**16))
def test_repeat_property(shape: list[int], repeats: list[int], seed: int) -> None:
    _check(lambda d: {"y": d["x"].repeat(*repeats)}, {"x": _randn(seed, shape)},
           f"{shape} repeats={repeats} seed={seed}")


def test_cat_onto_an_empty_cache_skips_it() -> None:
    empty = torch.tensor([])
    _check(lambda d: {"y": torch.cat([empty, d["k"]], dim=-2)}, {"k": _randn(0, (2, 3, 4))},
           "cat([], k)")


def test_attention_row_hidden_by_the_mask_is_zero() -> None:
    q, k, v = (_randn(s, (1, 2, 3, 4)) for s in range(3))
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    mask[..., 0, :] = False
    inputs = {"q": q, "k": k, "v": v, "mask": mask}
    _check(lambda d: {"y": F.scaled_dot_product_attention(
        d["q"], d["k"], d["v"], attn_mask=d["mask"])}, inputs, "hidden row")


def test_boolean_mask_index_is_unsupported_with_its_line() -> None:
    with pytest.raises(UnsupportedOperationError, match="bool index") as info:
        capture(lambda d: {"y": d["x"][d["x"] > 0]}, {"x": _randn(0, (4,))})
    assert "test_ops_llm.py" in str(info.value)
