"""A Hugging Face Llama split into pipeline stages, each a module of its own that a Context
compiles by itself (MLSDK's pipeline-parallel Llama: ``compile_pp_llama.py``,
``run_pp_llama.py``).

``split_llama(model, n_stages)`` returns ``n_stages`` modules, called with keyword tensors and
returning a dict of tensors:

============  ==========================================  =====================================
stage         takes                                       returns
============  ==========================================  =====================================
0             ``input_ids``, ``position_ids``             ``hidden_states_out``,
              (the embedding and the rotary table)        ``position_embeddings_cos_out``,
                                                          ``position_embeddings_sin_out``
1 .. n - 2    ``hidden_states``,                          ``hidden_states_out``, the cos and sin
              ``position_embeddings_cos``,                passed on (all but the last of these
              ``position_embeddings_sin``,                stages), ``past_key_values_out`` (a
              ``attention_mask`` (4-D, additive),         cache of this stage's layers only)
              ``position_ids``, ``past_key_values``
              (this stage's layers, or None)
n - 1         ``hidden_states`` (the final norm and       ``logits``
              the LM head)
============  ==========================================  =====================================

The decoder layers are spread ``ceil(layers / (n_stages - 2))`` to a stage, in order: stage
``s`` has layers ``[(s - 1) * per, s * per)``, the slice of the stacked KV cache MLSDK's
example hands it. The stages share the model's parameters (no copy): each stage's decoder
layers are shallow copies whose attention counts its layers from 0, so a stage's cache holds
its own layers only.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import torch
from torch import nn

__all__ = ["split_llama", "stage_layers"]


def stage_layers(n_layers: int, n_stages: int) -> list[range]:
    """The decoder layers of each decoder stage (stages ``1 .. n_stages - 2``), as MLSDK's
    example slices the KV cache: ``ceil(n_layers / (n_stages - 2))`` to a stage.

    Raises
    ------
    ValueError
        Fewer than 3 stages, or a split that leaves a decoder stage without layers.
    """
    if isinstance(n_stages, bool) or not isinstance(n_stages, int) or n_stages < 3:
        raise ValueError("split_llama needs n_stages >= 3 (the embedding, at least one "
                         f"decoder stage, the LM head), not {n_stages!r}")
    decoders = n_stages - 2
    per = -(-n_layers // decoders)
    ranges = [range(min(s * per, n_layers), min((s + 1) * per, n_layers))
              for s in range(decoders)]
    empty = [index + 1 for index, r in enumerate(ranges) if len(r) == 0]
    if empty:
        raise ValueError(
            f"{n_layers} decoder layers over {decoders} decoder stages ({per} to a stage, "
            f"rounded up as MLSDK's example slices the cache) leave stage(s) {empty} without "
            f"layers: choose n_stages - 2 so that ceil({n_layers} / (n_stages - 2)) * "
            "(n_stages - 3) < layers")
    return ranges


class EmbeddingStage(nn.Module):
    """Stage 0: token embedding and the rotary table of the positions."""

    def __init__(self, embed_tokens: nn.Module, rotary_emb: nn.Module):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.rotary_emb = rotary_emb

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor,
                ) -> dict[str, torch.Tensor]:
        hidden = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(hidden, position_ids)
        return {"hidden_states_out": hidden, "position_embeddings_cos_out": cos,
                "position_embeddings_sin_out": sin}


def _cache_argument(layer: nn.Module) -> str:
    """What the installed transformers' decoder layer calls its cache argument."""
    parameters = inspect.signature(layer.forward).parameters
    for name in ("cache", "past_key_values", "past_key_value"):
        if name in parameters:
            return name
    raise TypeError(f"{type(layer).__name__}.forward takes no cache argument (cache, "
                    "past_key_values or past_key_value): an unsupported transformers version")


def _new_cache() -> Any:
    from transformers.cache_utils import DynamicCache

    return DynamicCache()


def _local_layer(layer: nn.Module, index: int) -> nn.Module:
    """A shallow copy of ``layer`` (the same parameters) whose attention is layer ``index``
    of its cache."""
    local = copy.copy(layer)
    local._modules = dict(layer._modules)
    attention: Any = copy.copy(layer._modules["self_attn"])
    attention.layer_idx = index
    local._modules["self_attn"] = attention
    if hasattr(layer, "layer_idx"):
        local.__dict__["layer_idx"] = index
    return local


class DecoderStage(nn.Module):
    """Stages 1 .. n - 2: a run of decoder layers with their own KV cache."""

    def __init__(self, layers: list[nn.Module], pass_rotary: bool):
        super().__init__()
        self.layers = nn.ModuleList([_local_layer(layer, i) for i, layer in enumerate(layers)])
        self.pass_rotary = pass_rotary
        self._cache_argument = _cache_argument(self.layers[0])

    def forward(self, hidden_states: torch.Tensor, position_embeddings_cos: torch.Tensor,
                position_embeddings_sin: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor, past_key_values: Any = None,
                ) -> dict[str, Any]:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 4:
            shape = (list(attention_mask.shape) if isinstance(attention_mask, torch.Tensor)
                     else type(attention_mask).__name__)
            raise ValueError(
                "a decoder stage takes the additive 4-D attention mask [batch, 1, queries, "
                f"keys] (prepare_4d_causal_attention_mask_with_cache_position's), not {shape}")
        cache = _new_cache() if past_key_values is None else past_key_values
        rotary = (position_embeddings_cos, position_embeddings_sin)
        hidden = hidden_states
        for layer in self.layers:
            out = layer(hidden, attention_mask=attention_mask, position_ids=position_ids,
                        position_embeddings=rotary, use_cache=True,
                        **{self._cache_argument: cache})
            hidden = out[0] if isinstance(out, tuple) else out
        result: dict[str, Any] = {"hidden_states_out": hidden}
        if self.pass_rotary:
            result["position_embeddings_cos_out"] = position_embeddings_cos
            result["position_embeddings_sin_out"] = position_embeddings_sin
        result["past_key_values_out"] = cache
        return result


class HeadStage(nn.Module):
    """The last stage: the final norm and the LM head."""

    def __init__(self, norm: nn.Module, lm_head: nn.Module):
        super().__init__()
        self.norm = norm
        self.lm_head = lm_head

    def forward(self, hidden_states: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.lm_head(self.norm(hidden_states))}


def split_llama(model: Any, n_stages: int) -> list[nn.Module]:
    """``model`` (a ``LlamaForCausalLM``) as ``n_stages`` pipeline stages (module docstring).

    Chained on the same inputs, the stages compute the model's logits and KV cache (the
    decoder stages' caches concatenated along the layers): see
    ``tests/sdk/experimental/test_llm_modeling_staged_llama.py``.

    Raises
    ------
    TypeError
        ``model`` is not a Llama causal LM (no ``model.embed_tokens``, ``layers``,
        ``norm``, ``rotary_emb`` and ``lm_head``).
    ValueError
        ``n_stages`` below 3, or leaving a decoder stage without layers.
    """
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not hasattr(model, "lm_head") or not all(
            hasattr(inner, name) for name in needed):
        raise TypeError("split_llama takes a Llama causal LM (LlamaForCausalLM: "
                        "model.embed_tokens, model.layers, model.norm, model.rotary_emb, "
                        f"lm_head), not {type(model).__name__}")
    layers = list(inner.layers)
    ranges = stage_layers(len(layers), n_stages)
    stages: list[nn.Module] = [EmbeddingStage(inner.embed_tokens, inner.rotary_emb)]
    for index, span in enumerate(ranges):
        stages.append(DecoderStage([layers[i] for i in span],
                                   pass_rotary=index < len(ranges) - 1))
    stages.append(HeadStage(inner.norm, model.lm_head))
    for stage in stages:
        stage.train(model.training)
    return stages
