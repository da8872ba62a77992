"""Tiny Hugging Face models with random weights, from configs alone (nothing is downloaded): what
the kit's tests, examples and benches run; ``transformers`` must be installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

__all__ = ["ATTENTION_IMPLEMENTATIONS", "CHAT_TEMPLATE", "byte_tokenizer", "save_tiny_llama",
           "tiny_bert", "tiny_gpt2", "tiny_llama", "tiny_whisper"]

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


#: A chat template in the common ``<|role|>`` style: each message, then the assistant's turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")

_SPECIALS = ("<pad>", "<s>", "</s>")  # ids 0, 1, 2: tiny_llama's pad, bos and eos


def byte_tokenizer(chat_template: str | None = None) -> Any:
    """A byte-level BPE tokenizer built offline (``tokenizers``, no merges): ``<pad>``,
    ``<s>``, ``</s>`` as ids 0 to 2, then one id per byte (259 ids), any text in, ``<s>``
    before each text; a ``PreTrainedTokenizerFast`` with ``chat_template`` if given."""
    transformers = _transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {token: index for index, token in enumerate(_SPECIALS)}
    vocab.update({char: len(_SPECIALS) + index for index, char in enumerate(sorted(alphabet))})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
        chat_template=chat_template)


def save_tiny_llama(path: str | Path, *, chat_template: str | None = None, seed: int = 0,
                    **overrides: Any) -> Path:
    """Save a random :func:`tiny_llama` (vocabulary 260) and :func:`byte_tokenizer` with
    ``save_pretrained`` into ``path``: a local model directory ``from_pretrained`` reads
    offline, as MLSDK's examples take with ``--model_name``. Returns ``path``."""
    path = Path(path)
    model = tiny_llama(seed=seed, **{"vocab_size": 260, **overrides})
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path)
    byte_tokenizer(chat_template).save_pretrained(path)
    # transformers 5 names the class TokenizersBackend; 4.x reads the name it has there too,
    # so the directory loads under both (MLSDK's examples pin 4.44).
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    if chat_template is not None:  # 5 keeps it in chat_template.jinja, 4.x reads it here
        config["chat_template"] = chat_template
    config_file.write_text(json.dumps(config, indent=2))
    return path
