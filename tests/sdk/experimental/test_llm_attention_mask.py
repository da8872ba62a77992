"""mlsdk.experimental.llm.attention_mask: the 4-D causal mask of a left-padded batch."""

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
