"""Tiny Hugging Face models with random weights, from configs alone (nothing is downloaded): what
the kit's tests, examples and benches run; ``transformers`` must be installed."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["ATTENTION_IMPLEMENTATIONS", "tiny_bert", "tiny_gpt2", "tiny_llama", "tiny_whisper"]

#: transformers' default (``"sdpa"``) and its explicit softmax (``"eager"``).
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise ImportError("mlsdk.experimental.llm.tiny builds transformers models: install "
                          "the kit's test extras (pip install -e '.[test]')") from None
    return transformers


def _build(config: Any, cls: str, seed: int) -> Any:
    torch.manual_seed(seed)
    return getattr(_transformers(), cls)(config).eval()


def tiny_llama(attn: str = "sdpa", seed: int = 0, **overrides: Any) -> Any:
    """``LlamaForCausalLM``: hidden 64, 2 layers, 4 heads over 2 KV heads (grouped-query),
    vocabulary 256; ``overrides`` replace any ``LlamaConfig`` field."""
    fields = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 512, "pad_token_id": 0, "bos_token_id": 1,
              "eos_token_id": 2, **overrides}
    config = _transformers().LlamaConfig(attn_implementation=attn, **fields)
    return _build(config, "LlamaForCausalLM", seed)


def tiny_gpt2(attn: str = "sdpa", seed: int = 0, **overrides: Any) -> Any:
    """``GPT2LMHeadModel``: width 64, 2 layers, 4 heads, vocabulary 256, 64 positions."""
    fields = {"vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64,
              "bos_token_id": 1, "eos_token_id": 2, **overrides}
    config = _transformers().GPT2Config(attn_implementation=attn, **fields)
    return _build(config, "GPT2LMHeadModel", seed)


def tiny_bert(attn: str = "sdpa", seed: int = 0, **overrides: Any) -> Any:
    """``BertForSequenceClassification``: hidden 64, 2 layers, 4 heads, 2 labels."""
    fields = {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128,
              "max_position_embeddings": 64, **overrides}
    config = _transformers().BertConfig(attn_implementation=attn, **fields)
    return _build(config, "BertForSequenceClassification", seed)


def tiny_whisper(attn: str = "sdpa", seed: int = 0, **overrides: Any) -> Any:
    """``WhisperForConditionalGeneration``: width 32, 2 encoder and 2 decoder layers, 16 mel
    bins over 32 frames (16 encoder positions), vocabulary 128."""
    fields = {"vocab_size": 128, "num_mel_bins": 16, "encoder_layers": 2, "decoder_layers": 2,
              "encoder_attention_heads": 4, "decoder_attention_heads": 4, "d_model": 32,
              "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_source_positions": 16,
              "max_target_positions": 32, "pad_token_id": 0, "bos_token_id": 1,
              "eos_token_id": 2, "decoder_start_token_id": 1, **overrides}
    config = _transformers().WhisperConfig(attn_implementation=attn, **fields)
    return _build(config, "WhisperForConditionalGeneration", seed)
