"""mlsdk.experimental.llm.kv_cache: the stacked KV cache and its conversions."""

from __future__ import annotations

import pytest
import torch
from mlsdk.experimental.llm.kv_cache import (
    kv_cache_to_legacy,
    kv_cache_to_plamo,
    kv_cache_to_tensor,
)


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
