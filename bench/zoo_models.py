"""The models of ``bench_zoo.py``: tiny random configurations of transformers architectures
(causal LMs, masked LMs, seq2seq, vision, audio), diffusers' UNet2D, UNet2DCondition and VAE,
and a peft LoRA on a Llama, each with a batch and the tensor its comparison reads.

Nothing is downloaded: every model is built from a config, with random weights. A tiny config
starts from the architecture's defaults (``AutoConfig.for_model``) and shrinks the fields it
has of :data:`TINY` (widths 32, 2 layers, 2 heads, vocabulary 128); every dropout, drop-path,
layer-drop and SpecAugment masking probability is 0 so that a training step is deterministic.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

Batch = dict[str, torch.Tensor]

#: Config fields a tiny model gets, where its config has them.
TINY: dict[str, Any] = {
    "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
    "max_position_embeddings": 64, "n_positions": 64, "n_embd": 32, "n_layer": 2, "n_head": 2,
    "n_inner": 64, "d_model": 32, "d_ff": 64, "d_kv": 16, "num_layers": 2,
    "num_decoder_layers": 2, "num_heads": 2, "encoder_layers": 1, "decoder_layers": 1,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64, "ffn_dim": 64, "embedding_size": 32, "embed_dim": 32,
    "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
"type_vocab_size": 2, "pad_token_id": 0, "bos_token_id": 1,
    "eos_token_id": 2, "decoder_start_token_id": 1, "rotary_dim": 8, "partial_rotary_factor": 0.5,
    "num_labels": 3,
    # vision
    "image_size": 32, "patch_size": 8, "num_channels": 3, "hidden_sizes": [8, 16],
    "depths": [1, 1], "num_stages": 2,
    # audio
    "num_mel_bins": 16, "max_source_positions": 16, "max_target_positions": 32,
    "conv_dim": [16, 16], "conv_stride": [5, 2], "conv_kernel": [10, 3],
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2,
    "num_feat_extract_layers": 2, "classifier_proj_size": 16, "tdnn_dim": [16, 16],
}

#: Per-architecture fields beside :data:`TINY` (what its own checks need).
EXTRA: dict[str, dict[str, Any]] = {
    "gemma2": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "convnext": {"hidden_sizes": [8, 16], "depths": [1, 1]},
    "swin": {"embed_dim": 8, "depths": [1, 1], "num_heads": [2, 2], "window_size": 2,
             "patch_size": 4},
    "mobilenet_v2": {"image_size": 32, "depth_multiplier": 0.25},
    "efficientnet": {"image_size": 32, "width_coefficient": 0.1, "depth_coefficient": 0.1,
                     "hidden_dim": 128},
    "mobilenet_v1": {"image_size": 32, "depth_multiplier": 0.25},
    "mobilevit": {"image_size": 32, "patch_size": 2, "hidden_sizes": [16, 24, 32],
                  "neck_hidden_sizes": [8, 8, 16, 16, 24, 32, 64]},
    "segformer": {"num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1],
                  "hidden_sizes": [8, 16], "patch_sizes": [7, 3], "strides": [4, 2],
                  "num_attention_heads": [1, 2], "mlp_ratios": [2, 2],
                  "decoder_hidden_size": 16},
    "swinv2": {"embed_dim": 8, "depths": [1, 1], "num_heads": [2, 2], "window_size": 2,
               "patch_size": 4},
    "bit": {"hidden_sizes": [16, 32], "depths": [1, 1], "embedding_size": 8, "num_groups": 4},
    "mamba": {"conv_kernel": 4, "state_size": 8, "time_step_rank": 4, "expand": 2},
    "led": {"max_encoder_position_embeddings": 64, "max_decoder_position_embeddings": 64,
            "attention_window": 4},
    "regnet": {"hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 8},
    "resnet": {"hidden_sizes": [8, 16], "depths": [1, 1], "embedding_size": 8},
    "levit": {"hidden_sizes": [16, 32], "num_attention_heads": [2, 2], "depths": [1, 1],
              "key_dim": [8, 8], "patch_size": 16, "image_size": 64,
              "down_ops": [["Subsample", 8, 2, 4, 2, 2]]},
    "poolformer": {"hidden_sizes": [8, 16], "depths": [1, 1], "num_encoder_blocks": 2,
                   "patch_sizes": [7, 3], "strides": [4, 2], "padding": [2, 1]},
    "funnel": {"block_sizes": [1, 1], "d_head": 16, "d_inner": 64, "n_head": 2},
    "whisper": {"vocab_size": 128, "max_source_positions": 16},
    "falcon": {"new_decoder_architecture": False, "multi_query": True},
    "mpt": {"d_model": 32, "n_heads": 2, "n_layers": 2, "expansion_ratio": 2},
    "bloom": {"n_head": 2},
    "ctrl": {"dff": 64},
    "modernbert": {"global_attn_every_n_layers": 1, "local_attention": 16},
    "dinov2": {"image_size": 32, "patch_size": 8},
    "beit": {"use_mask_token": False},
    "deberta-v2": {"pos_att_type": ["c2p", "p2c"]},
}


#: Architectures whose export path (the state capture traces in) needs an ``attention_mask``,
#: which their eager path makes itself when none is given: the batch carries one of ones.
WITH_MASK = frozenset({"switch_transformers", "longt5"})


@dataclass
class Entry:
    """A zoo model: ``build() -> (model, batch)``; ``output(model, batch)`` is the tensor both
    the comparison and the training loss read."""

    name: str
    family: str
    build: Callable[[], tuple[torch.nn.Module, Batch]]
    output: Callable[[torch.nn.Module, Batch], torch.Tensor]


def tiny_config(model_type: str) -> Any:
    """``AutoConfig.for_model(model_type)`` shrunk to :data:`TINY` and :data:`EXTRA`."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    fields = {**TINY, **EXTRA.get(model_type, {})}
    for key, value in fields.items():
        if hasattr(config, key) or key in EXTRA.get(model_type, {}):
            try:
                setattr(config, key, value)
            except (AttributeError, NotImplementedError):  # derived fields (a property)
                continue
    # Every probability of dropping or masking something at random (dropout, GPT-2's
    # ``*_pdrop``, stochastic depth's ``drop_path_rate``, wav2vec2's ``layerdrop`` and its
    # SpecAugment ``mask_time_prob``) is 0: a training step draws no random numbers.
    for key in list(vars(config)):
        random = "drop" in key or (key.startswith("mask_") and key.endswith("_prob"))
        if random and isinstance(getattr(config, key), float):
            setattr(config, key, 0.0)
    config.use_cache = False
    return config


def _first(out: Any) -> torch.Tensor:
    """The first tensor of a model output (logits, or last hidden state)."""
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state", "sample", "prediction_logits"):
        value = getattr(out, key, None)
        if isinstance(value, torch.Tensor):
            return value
    values = out.to_tuple() if hasattr(out, "to_tuple") else tuple(out)
    return next(v for v in values if isinstance(v, torch.Tensor))


def _tokens(vocab: int, shape: tuple[int, int] = (2, 8), seed: int = 0) -> torch.Tensor:
    return torch.randint(3, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _transformers_entry(model_type: str, family: str, cls: str) -> Entry:
    def build() -> tuple[torch.nn.Module, Batch]:
        import transformers

        config = tiny_config(model_type)
        torch.manual_seed(0)
        found = getattr(transformers, cls)._model_mapping[type(config)]
        # A tuple for a type with several heads (DeiT with and without its teacher): the first.
        model = (found[0] if isinstance(found, tuple) else found)(config)  # SDPA where it has it
        model.eval()
        g = torch.Generator().manual_seed(1)
        vocab = int(getattr(config, "vocab_size", 128) or 128)
        mask = ({"attention_mask": torch.ones(2, 8, dtype=torch.int64)}
                if model_type in WITH_MASK else {})
        if family in ("causal-lm", "masked-lm"):
            return model, {"input_ids": _tokens(vocab), **mask}
        if family == "seq2seq":
            return model, {"input_ids": _tokens(vocab),
                           "decoder_input_ids": _tokens(vocab, (2, 4), 2), **mask}
        if family == "vision":
            side = int(getattr(config, "image_size", 32) or 32)
            return model, {"pixel_values": torch.randn(2, 3, side, side, generator=g)}
        name = model.main_input_name
        if name == "input_features":
            frames = 2 * int(getattr(config, "max_source_positions", 16))
            bins = int(getattr(config, "num_mel_bins", 16))
            return model, {name: torch.randn(2, bins, frames, generator=g)}
        return model, {name: torch.randn(2, 1600, generator=g)}

    return Entry(model_type, family, build, lambda m, d: _first(m(**d)))


#: (model_type, family, transformers class), the architectures the bench builds by default.
TRANSFORMERS: tuple[tuple[str, str, str], ...] = (
    *((t, "causal-lm", "AutoModelForCausalLM") for t in (
        "gpt2", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "qwen2",
        "qwen2_moe", "qwen3", "phi", "phi3", "gemma", "gemma2", "falcon", "opt", "bloom",
        "codegen", "stablelm", "olmo", "starcoder2", "granite", "biogpt", "xglm",
        "gpt_bigcode", "cohere", "persimmon", "mpt", "qwen3_moe", "olmoe", "gemma3_text", "ctrl",
        "mamba")),
    *((t, "masked-lm", "AutoModelForMaskedLM") for t in (
        "bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
        "xlm-roberta", "mpnet", "funnel", "megatron-bert", "roformer", "convbert",
        "modernbert", "camembert", "data2vec-text", "mobilebert", "squeezebert",
        "nystromformer", "ernie", "xlm")),
    *((t, "seq2seq", "AutoModelForSeq2SeqLM") for t in (
        "t5", "bart", "mbart", "pegasus", "marian", "blenderbot-small", "mt5", "led", "m2m_100",
        "switch_transformers", "longt5", "umt5", "blenderbot", "plbart", "prophetnet")),
    *((t, "vision", "AutoModelForImageClassification") for t in (
        "vit", "deit", "beit", "convnext", "resnet", "swin", "mobilenet_v2", "regnet",
        "dinov2", "poolformer", "levit", "efficientnet", "mobilevit", "segformer", "bit",
        "swinv2", "data2vec-vision", "mobilenet_v1", "focalnet")),
    *((t, "audio", "AutoModelForAudioClassification") for t in (
        "wav2vec2", "hubert", "wavlm", "whisper", "data2vec-audio", "sew", "unispeech")),
)


def _diffusers_entries() -> list[Entry]:
    def unet() -> tuple[torch.nn.Module, Batch]:
        from diffusers import UNet2DModel

        torch.manual_seed(0)
        model = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                            block_out_channels=(16, 32), norm_num_groups=8,
                            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                            up_block_types=("AttnUpBlock2D", "UpBlock2D")).eval()
        g = torch.Generator().manual_seed(1)
        return model, {"sample": torch.randn(2, 3, 16, 16, generator=g),
                       "timestep": torch.tensor([10, 500])}

    def unet_cond() -> tuple[torch.nn.Module, Batch]:
        from diffusers import UNet2DConditionModel

        torch.manual_seed(0)
        model = UNet2DConditionModel(
            sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
            block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=24,
            attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")).eval()
        g = torch.Generator().manual_seed(1)
        return model, {"sample": torch.randn(2, 4, 16, 16, generator=g),
                       "timestep": torch.tensor([10, 500]),
                       "encoder_hidden_states": torch.randn(2, 6, 24, generator=g)}

    def vae() -> tuple[torch.nn.Module, Batch]:
        from diffusers import AutoencoderKL

        torch.manual_seed(0)
        model = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4,
                              block_out_channels=(16, 32), layers_per_block=1,
                              norm_num_groups=8,
                              down_block_types=("DownEncoderBlock2D",) * 2,
                              up_block_types=("UpDecoderBlock2D",) * 2).eval()
        g = torch.Generator().manual_seed(1)
        return model, {"sample": torch.randn(2, 3, 16, 16, generator=g)}

    def vae_output(m: torch.nn.Module, d: Batch) -> torch.Tensor:
        # The posterior's mean, decoded (sampling would draw random numbers).
        return m(d["sample"], sample_posterior=False).sample

    return [Entry("unet2d", "diffusers", unet, lambda m, d: _first(m(**d))),
            Entry("unet2d-condition", "diffusers", unet_cond, lambda m, d: _first(m(**d))),
            Entry("vae", "diffusers", vae, vae_output)]


def _peft_entry() -> Entry:
    def build() -> tuple[torch.nn.Module, Batch]:
        import transformers
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)
        base = transformers.LlamaForCausalLM(tiny_config("llama"))
        config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                            lora_dropout=0.0)
        model = get_peft_model(base, config).eval()
        # LoRA's B starts at zero (the adapter is the identity): give it values to compare.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
        return model, {"input_ids": _tokens(128)}

    return Entry("lora-llama", "peft", build, lambda m, d: _first(m(**d)))


def entries() -> list[Entry]:
    """Every zoo model whose package is installed. Nothing heavy is imported here (each
    ``build`` imports what it needs): the bench's worker for one model lists them all, and
    importing diffusers and peft took 16 s of a 29 s worker."""
    found = [_transformers_entry(*row) for row in TRANSFORMERS]
    if importlib.util.find_spec("diffusers") is not None:
        found += _diffusers_entries()
    if importlib.util.find_spec("peft") is not None:
        found.append(_peft_entry())
    return found
