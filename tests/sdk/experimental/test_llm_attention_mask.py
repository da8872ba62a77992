"""mlsdk.experimental.llm's helpers: the 4-D causal mask of a left-padded batch, the stacked KV
cache and its conversions, and ``Context.compile(num_compiler_threads=...)``."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsdk import storage
from mlsdk.experimental.llm.attention_mask import (
    prepare_4d_causal_attention_mask_with_cache_position as prepare_mask,
)
from mlsdk.experimental.llm.kv_cache import (
    kv_cache_to_legacy,
    kv_cache_to_plamo,
    kv_cache_to_tensor,
)

os.environ["HF_HUB_OFFLINE"] = "1"
MIN = torch.finfo(torch.float32).min


def _brute_force(mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Key j visible to query i: a real token whose position among the row's real tokens
    (counted from 1, MLSDK's ``cumsum``) is at most the query's."""
    batch, keys = mask.shape
    out = torch.full((batch, 1, positions.shape[1], keys), MIN)
    for b in range(batch):
        for i in range(positions.shape[1]):
            seen = 0
            for j in range(keys):
                if mask[b, j]:
                    seen += 1
                    if seen <= positions[b, i]:
                        out[b, 0, i, j] = 0.0
    return out


@settings(max_examples=25, deadline=None, derandomize=True)
@given(pads=st.lists(st.integers(0, 4), min_size=1, max_size=3), real=st.integers(1, 4),
       queries=st.integers(1, 3))
def test_mask_of_a_left_padded_batch_property(pads: list[int], real: int, queries: int) -> None:
    width = max(pads) + real
    mask = torch.tensor([[0] * p + [1] * (width - p) for p in pads])
    # The queries are each row's last tokens, at their positions among its real tokens.
    positions = mask.cumsum(-1)[:, -queries:]
    got = prepare_mask(mask, positions, torch.float32)
    torch.testing.assert_close(got, _brute_force(mask, positions),
                               msg=lambda m: f"pads={pads} real={real} queries={queries}: {m}")


def test_mask_traces_into_a_compiled_function(context, tmp_path):
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    positions = mask.cumsum(-1)[:, -2:]
    fn = context.compile(lambda d: {"m": prepare_mask(d["a"], d["p"], torch.float32)},
                         {"a": mask, "p": positions}, storage.path(tmp_path / "mask"))
    torch.testing.assert_close(fn({"a": mask, "p": positions})["m"].cpu(),
                               _brute_force(mask, positions))


@pytest.mark.parametrize(("args", "message"), [
    ((torch.ones(2, 3, 1), torch.ones(2, 1), torch.float32), "must be 2-D"),
    ((torch.ones(2, 3), torch.ones(1, 1), torch.float32), "batch 2 but position_ids has batch 1"),
    ((torch.ones(2, 3), torch.ones(2, 1), torch.int64), "floating dtype, not torch.int64"),
])
def test_mask_errors_name_what_was_given(args, message):
    with pytest.raises(ValueError, match=message):
        prepare_mask(*args)


def _layers(seed: int, count: int = 3) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple((torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 4, 5, 8, generator=g))
                 for _ in range(count))


def test_stacked_cache_is_layers_by_kv(seed):
    layers = _layers(seed)
    stacked = kv_cache_to_tensor(layers)
    assert stacked.shape == (3, 2, 2, 4, 5, 8)
    for index, (key, value) in enumerate(layers):
        assert torch.equal(stacked[index, 0], key) and torch.equal(stacked[index, 1], value)
    back = kv_cache_to_plamo(stacked)
    assert all(torch.equal(a, b) for pair, want in zip(back, layers, strict=True)
               for a, b in zip(pair, want, strict=True))


def test_legacy_cache_is_what_the_installed_transformers_takes(seed):
    cache_utils = pytest.importorskip("transformers.cache_utils")
    stacked = kv_cache_to_tensor(_layers(seed))
    legacy = kv_cache_to_legacy(stacked)
    assert isinstance(legacy, cache_utils.DynamicCache)
    assert torch.equal(kv_cache_to_tensor(legacy), stacked)  # a cache object stacks back


@pytest.mark.parametrize(("cache", "error", "message"), [
    (torch.ones(3), TypeError, "not Tensor"),
    ((), ValueError, "has no layers"),
    (((torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 2)),), ValueError, "layer 0 has"),
    ((torch.ones(2),), TypeError, "layer 0 of the cache must be a \\(key, value\\) pair"),
])
def test_stacking_errors_name_what_was_given(cache, error, message):
    with pytest.raises(error, match=message):
        kv_cache_to_tensor(cache)


@pytest.mark.parametrize("convert", [kv_cache_to_legacy, kv_cache_to_plamo])
def test_unstacking_takes_the_stacked_layout_only(convert):
    with pytest.raises(ValueError, match=r"not \[3, 3, 1, 1, 1, 1\]"):
        convert(torch.ones(3, 3, 1, 1, 1, 1))


@pytest.mark.parametrize("threads", [-1, 1, 8])
def test_num_compiler_threads_is_accepted(context, tmp_path, threads):
    fn = context.compile(lambda d: {"y": d["x"] * 2}, {"x": torch.ones(3)},
                         storage.path(tmp_path / "f"), num_compiler_threads=threads)
    assert torch.equal(fn({"x": torch.ones(3)})["y"].cpu(), torch.full((3,), 2.0))


@pytest.mark.parametrize("threads", [0, -2, 1.5, True, "4"])
def test_num_compiler_threads_is_validated(context, tmp_path, threads):
    with pytest.raises(ValueError, match=f"positive int, not {threads!r}"):
        context.compile(lambda d: {"y": d["x"]}, {"x": torch.ones(3)},
                        storage.path(tmp_path / "f"), num_compiler_threads=threads)
