"""The 4-D additive causal mask of a left-padded batch, from its 2-D mask and positions."""

from __future__ import annotations

import torch

__all__ = ["prepare_4d_causal_attention_mask_with_cache_position"]


def prepare_4d_causal_attention_mask_with_cache_position(
    attention_mask: torch.Tensor, position_ids: torch.Tensor, dtype: torch.dtype,
) -> torch.Tensor:
    """The additive mask ``[batch, 1, queries, keys]`` a model adds to its attention scores.

    MLSDK's contract (its ``llm_infer`` and pipeline-parallel Llama examples): positions
    count a row's real tokens from 1, ``position_ids = attention_mask.cumsum(1)``, so a
    token's position is the number of real tokens up to and including it (padding reads 0).
    Key ``j`` is visible to query ``i`` of row ``b`` when ``attention_mask[b, j]`` is 1 and
    the key's position (``attention_mask[b].cumsum()[j]``) is at most
    ``position_ids[b, i]``: causal attention over the row's real tokens, whatever padding
    sits to their left. Visible entries are 0, the others ``torch.finfo(dtype).min``. Only
    tensor operations: it traces into a compiled function.

    Positions from 0 (Hugging Face's ``cumsum - 1``) pass ``position_ids + 1``: given
    0-based positions, each query would also see the key after it.

    Parameters
    ----------
    attention_mask : torch.Tensor
        ``[batch, keys]`` of 0 (padding) and 1 (a token): the past tokens and then the
        queries, left-padded.
    position_ids : torch.Tensor
        ``[batch, queries]``: each query's position among its row's real tokens, counted
        from 1 (what ``attention_mask.cumsum(-1)`` gives at the queries' columns).
    dtype : torch.dtype
        A floating dtype: the mask's, the model's activations'.

    Returns
    -------
    torch.Tensor
        ``[batch, 1, queries, keys]`` of ``dtype``.

    Raises
    ------
    ValueError
        When the masks are not 2-D with the same batch, or ``dtype`` is not floating.
    """
    if attention_mask.dim() != 2 or position_ids.dim() != 2:
        raise ValueError("attention_mask and position_ids must be 2-D ([batch, keys] and "
                         f"[batch, queries]), not {list(attention_mask.shape)} and "
                         f"{list(position_ids.shape)}")
    if attention_mask.shape[0] != position_ids.shape[0]:
        raise ValueError(f"attention_mask has batch {attention_mask.shape[0]} but position_ids "
                         f"has batch {position_ids.shape[0]}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, not {dtype}")
    real = attention_mask != 0
    key_positions = real.to(torch.int64).cumsum(-1)
    causal = key_positions[:, None, :] <= position_ids.to(torch.int64)[:, :, None]
    visible = (causal & real[:, None, :])[:, None]
    zero = torch.zeros((), dtype=dtype)
    hidden = torch.full((), torch.finfo(dtype).min, dtype=dtype)
    return torch.where(visible, zero, hidden)
