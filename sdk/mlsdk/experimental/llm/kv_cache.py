"""A model's KV cache as one tensor (layers x {k, v} x batch x heads x sequence x head dim), so a
compiled function takes and returns it as one input and one output, and back again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["kv_cache_to_legacy", "kv_cache_to_plamo", "kv_cache_to_static", "kv_cache_to_tensor"]


def _pairs(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (keys, values) of a tuple cache or a cache object."""
    layers = getattr(cache, "layers", None)
    if layers is not None:  # transformers' Cache: one layer object with .keys and .values each
        return [(layer.keys, layer.values) for layer in layers]
    if hasattr(cache, "key_cache") and hasattr(cache, "value_cache"):  # older transformers
        return list(zip(cache.key_cache, cache.value_cache, strict=True))
    if isinstance(cache, Sequence) and not isinstance(cache, torch.Tensor):
        pairs = []
        for index, layer in enumerate(cache):
            if not isinstance(layer, Sequence) or len(layer) < 2:
                raise TypeError(f"layer {index} of the cache must be a (key, value) pair, not "
                                f"{type(layer).__name__}")
            pairs.append((layer[0], layer[1]))
        return pairs
    raise TypeError("kv_cache_to_tensor takes a tuple of (key, value) pairs per layer or a "
                    f"transformers Cache, not {type(cache).__name__}")


def kv_cache_to_tensor(cache: Any) -> torch.Tensor:
    """Stack a model's KV cache into one tensor.

    Parameters
    ----------
    cache : tuple or transformers.Cache
        Per layer a ``(key, value)`` pair of ``[batch, heads, sequence, head_dim]`` tensors
        (the legacy tuple format, PLaMo's), or a cache object (``DynamicCache``,
        ``StaticCache``).

    Returns
    -------
    torch.Tensor
        ``[layers, 2, batch, heads, sequence, head_dim]``: ``[:, 0]`` the keys, ``[:, 1]`` the
        values.

    Raises
    ------
    TypeError
        For anything else.
    ValueError
        For an empty cache, or layers whose keys and values differ in shape.
    """
    pairs = _pairs(cache)
    if not pairs:
        raise ValueError("kv_cache_to_tensor: the cache has no layers")
    for index, (key, value) in enumerate(pairs):
        if not isinstance(key, torch.Tensor) or not isinstance(value, torch.Tensor):
            raise TypeError(f"layer {index} of the cache holds no tensors (an uninitialised "
                            "cache layer?)")
        if key.shape != value.shape or key.shape != pairs[0][0].shape:
            raise ValueError(f"every layer's keys and values must have one shape: layer "
                             f"{index} has {list(key.shape)} and {list(value.shape)}, layer 0 "
                             f"{list(pairs[0][0].shape)}")
    return torch.stack([torch.stack(pair) for pair in pairs])


def _check_stacked(tensor: torch.Tensor, what: str) -> None:
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 6 or tensor.shape[1] != 2:
        shape = list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise ValueError(f"{what} takes a [layers, 2, batch, heads, sequence, head_dim] tensor "
                         f"(kv_cache_to_tensor's), not {shape}")


def kv_cache_to_plamo(tensor: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """The stacked cache as PLaMo's ``past_key_values``: per layer a ``(key, value)`` pair.

    Parameters
    ----------
    tensor : torch.Tensor
        ``[layers, 2, batch, heads, sequence, head_dim]``, as :func:`kv_cache_to_tensor`.

    Raises
    ------
    ValueError
        For a tensor of another rank, or whose second dim is not 2.
    """
    _check_stacked(tensor, "kv_cache_to_plamo")
    return tuple((layer[0], layer[1]) for layer in tensor.unbind(0))


def kv_cache_to_legacy(tensor: torch.Tensor) -> Any:
    """The stacked cache as what the installed ``transformers`` models take as
    ``past_key_values``: a ``DynamicCache`` filled with each layer's keys and values
    (transformers 5 takes no tuples), or the tuple of ``(key, value)`` pairs when
    ``transformers`` is not installed or predates cache objects. ``tensor`` and the errors
    are :func:`kv_cache_to_plamo`'s.
    """
    _check_stacked(tensor, "kv_cache_to_legacy")
    pairs = kv_cache_to_plamo(tensor)
    try:
        from transformers.cache_utils import DynamicCache
    except ImportError:  # no transformers: the tuple format every older model reads
        return pairs
    if hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(pairs)
    return DynamicCache(ddp_cache_data=pairs)


def kv_cache_to_static(tensor: torch.Tensor, config: Any, cache_position: torch.Tensor) -> Any:
    """The stacked cache as a transformers ``StaticCache`` whose next write lands at
    ``cache_position[0]``: its slots are ``tensor``'s sequence positions, and the model writes
    a call's keys and values there with ``index_copy_`` (on copies: ``tensor`` is unchanged).

    Parameters
    ----------
    tensor : torch.Tensor
        ``[layers, 2, batch, heads, slots, head_dim]``, as :func:`kv_cache_to_tensor`.
    config : transformers.PretrainedConfig
        The model's configuration (its layer types).
    cache_position : torch.Tensor
        The slots of the call's tokens, consecutive (``torch.arange(start, start + n)``).

    Raises
    ------
    ValueError
        For a tensor of another rank, or whose second dim is not 2, or a model with other
        than full-attention layers (sliding windows, linear attention).
    ImportError
        When ``transformers`` is not installed.
    """
    _check_stacked(tensor, "kv_cache_to_static")
    from transformers.cache_utils import StaticCache, StaticLayer

    cache = StaticCache(config=config, max_cache_len=tensor.shape[4])
    layers: list[Any] = list(cache.layers)
    for index, (layer, (key, value)) in enumerate(
            zip(layers, kv_cache_to_plamo(tensor), strict=True)):
        if type(layer) is not StaticLayer:
            raise ValueError(f"kv_cache_to_static fills full-attention layers only; layer "
                             f"{index} of this model is a {type(layer).__name__}")
        layer.lazy_initialization(key, value)
        layer.keys, layer.values = key.clone(), value.clone()
        # The layer writes at cumulative_length (and advances it in place): a copy of the
        # call's first slot, so the write position is an input of the compiled function.
        layer.cumulative_length = cache_position[0].clone()
    return cache
