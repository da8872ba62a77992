"""Greedy generation with a compiled prefill and a compiled decode step over a fixed-size KV cache.

Two caches, one calling convention (``forward(inputs) -> {"logits", "next_token",
"next_past_key_values"}`` over ``input_ids``, ``attention_mask``, ``position_ids`` and the stacked
``past_key_values``, :func:`~mlsdk.experimental.llm.kv_cache.kv_cache_to_tensor`'s layout):

- ``"shifted"`` (MLSDK's ``llm_infer``): a window of the last ``cache_length`` keys and values;
  each call appends its tokens' and drops as many of the oldest, so the cache keeps its shape.
- ``"static"`` (gpt-fast's, Hugging Face's ``StaticCache``): ``cache_length`` slots, each call
  writes its tokens' keys and values at ``cache_position`` with ``index_copy``.

The decode step is compiled first with its cache output loop-carried into its own cache input
(``io_spec_constraints={"next_past_key_values": "past_key_values"}``), the prefill with its
cache output in the decode step's input spec: every hand-off of the cache is a relocation. The
small per-step inputs go through :meth:`~mlsdk.compiled.CompiledFunction.allocate_input_proxy`
and :meth:`~mlsdk.proxy.TensorProxy.load_from`, so a step moves only those bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ... import storage
from ...compiled import CompiledFunction
from ...context import Context
from .attention_mask import prepare_4d_causal_attention_mask_with_cache_position
from .kv_cache import kv_cache_to_legacy, kv_cache_to_static, kv_cache_to_tensor

__all__ = ["CACHES", "CompiledGenerator", "eager_generate", "llm_forward"]

#: The two caches: see the module docstring.
CACHES = ("shifted", "static")

Inputs = dict[str, torch.Tensor]


def _check_cache(cache: str) -> None:
    if cache not in CACHES:
        raise ValueError(f"cache must be one of {', '.join(CACHES)}, not {cache!r}")


def llm_forward(model: Any, cache: str = "shifted",
                name: str = "forward") -> Callable[[Inputs], Inputs]:
    """The function compiled for both prefill and decode: one call of ``model`` (a
    transformers causal LM) over a stacked KV cache.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal language model whose ``forward`` takes ``past_key_values`` (or ``cache``).
    cache : str
        ``"shifted"`` or ``"static"`` (module docstring). ``"static"`` also takes a
        ``cache_position`` input: the slots of this call's tokens.
    name : str
        The function's ``__name__``: what reports call it.

    Returns
    -------
    callable
        ``forward(inputs) -> {"logits": [batch, vocab] of the last token, "next_token":
        [batch, 1] its argmax, "next_past_key_values": the cache after this call}``.
    """
    _check_cache(cache)
    # transformers 5.x renamed forward's past_key_values to cache (the old name warns).
    parameters = inspect.signature(model.forward).parameters
    cache_argument = "cache" if "cache" in parameters else "past_key_values"

    def forward(inputs: Inputs) -> Inputs:
        ids, past = inputs["input_ids"], inputs["past_key_values"]
        # The helper counts positions from 1 (MLSDK's); these count from 0 (the model's).
        mask = prepare_4d_causal_attention_mask_with_cache_position(
            inputs["attention_mask"], inputs["position_ids"] + 1, model.dtype)
        if cache == "static":
            kv = kv_cache_to_static(past, model.config, inputs["cache_position"])
        else:
            kv = kv_cache_to_legacy(past)
        out = model(input_ids=ids, attention_mask=mask, position_ids=inputs["position_ids"],
                    use_cache=True, **{cache_argument: kv})
        # transformers 5.x returns it as out.cache (reading out.past_key_values warns).
        stacked = kv_cache_to_tensor(out["cache"] if "cache" in out else out.past_key_values)
        if cache == "shifted":
            stacked = stacked[:, :, :, :, ids.shape[1]:]
        logits = out.logits[:, -1]
        return {"logits": logits, "next_token": logits.argmax(-1, keepdim=True),
                "next_past_key_values": stacked}

    forward.__name__ = forward.__qualname__ = name
    return forward


class _Steps:
    """The host's bookkeeping of one generation: each call's small inputs."""

    def __init__(self, model: Any, cache: str, cache_length: int, input_ids: torch.Tensor,
                 attention_mask: torch.Tensor):
        _check_cache(cache)
        batch, prompt = input_ids.shape
        if cache == "static" and prompt > cache_length:
            raise ValueError(f"a prompt of {prompt} tokens does not fit a static cache of "
                             f"{cache_length}")
        self.cache, self.prompt, self.length = cache, prompt, cache_length
        mask = attention_mask.to(torch.int64)
        self.position = mask.sum(-1, keepdim=True) - 1  # each row's last real position
        config = model.config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        heads = getattr(config, "num_key_value_heads", None) or heads
        self.empty = torch.zeros(config.num_hidden_layers, 2, batch, heads, cache_length, head_dim,
                                 dtype=model.dtype)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
        if cache == "shifted":
            self.mask = torch.cat([torch.zeros(batch, cache_length, dtype=torch.int64), mask], 1)
        else:
            self.mask = torch.zeros(batch, cache_length, dtype=torch.int64)
            self.mask[:, :prompt] = mask
        self.first = {"input_ids": input_ids, "attention_mask": self.mask,
                      "position_ids": positions, **self._slots(0, prompt)}
        if cache == "shifted":
            self.mask = self.mask[:, -cache_length:]
        self.step = 0

    def _slots(self, start: int, count: int) -> Inputs:
        if self.cache != "static":
            return {}
        return {"cache_position": torch.arange(start, start + count)}

    def next_inputs(self, token: torch.Tensor) -> Inputs:
        """The decode step's inputs after ``token`` ([batch, 1]) was generated."""
        self.position = self.position + 1
        slot = self.prompt + self.step
        self.step += 1
        if self.cache == "shifted":
            mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], 1)
            self.mask = mask[:, 1:]
        else:
            if slot >= self.length:
                raise ValueError(f"the static cache of {self.length} slots is full after "
                                 f"{self.step - 1} new tokens")
            self.mask = mask = self.mask.clone()
            mask[:, slot] = 1
        return {"input_ids": token, "attention_mask": mask, "position_ids": self.position,
                **self._slots(slot, 1)}


def eager_generate(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   max_new_tokens: int, cache_length: int, cache: str = "shifted") -> torch.Tensor:
    """The generation :class:`CompiledGenerator` runs, in torch eager: ``[batch,
    max_new_tokens]`` greedy ids (the reference, and the benches' baseline)."""
    forward = llm_forward(model, cache)
    steps = _Steps(model, cache, cache_length, input_ids, attention_mask)
    inputs, past = steps.first, steps.empty
    tokens = []
    with torch.no_grad():
        for index in range(max_new_tokens):
            out = forward({**inputs, "past_key_values": past})
            past, token = out["next_past_key_values"], out["next_token"]
            tokens.append(token)
            if index < max_new_tokens - 1:
                inputs = steps.next_inputs(token)
    return torch.cat(tokens, 1)


class CompiledGenerator:
    """A compiled prefill and decode step of ``model``, and greedy generation with them.

    Parameters
    ----------
    context : Context
        Where both are compiled; register the model's parameters in its registry first
        (``context.registry.register("model", model)``) so the two share one copy.
    model : transformers.PreTrainedModel
        The causal language model (in ``eval()`` mode).
    batch, prompt_length, cache_length : int
        The shapes compiled for: prompts left-padded to ``prompt_length``, a cache of
        ``cache_length`` positions (a window for ``"shifted"``, slots for ``"static"``).
    codegen_dir : path
        A folder; the two programs go to ``prefill/`` and ``decode/`` in it.
    cache : str
        ``"shifted"`` or ``"static"``.
    num_compiler_threads : int
        Passed to :meth:`Context.compile`.

    Attributes
    ----------
    prefill, decode : CompiledFunction
        The two compiled functions.
    """

    def __init__(self, context: Context, model: Any, *, batch: int, prompt_length: int,
                 cache_length: int, codegen_dir: str | Path, cache: str = "shifted",
                 num_compiler_threads: int = -1):
        self.context, self.model, self.cache = context, model, cache
        self.cache_length = cache_length
        ids = torch.ones(batch, prompt_length, dtype=torch.int64)
        steps = _Steps(model, cache, cache_length, ids, torch.ones_like(ids))
        first = {**steps.first, "past_key_values": steps.empty}
        step = {**steps.next_inputs(ids[:, :1]), "past_key_values": steps.empty}
        root = Path(codegen_dir)
        self.decode: CompiledFunction = context.compile(
            llm_forward(model, cache, "decode"), step, storage.path(root / "decode"),
            io_spec_constraints={"next_past_key_values": "past_key_values"},
            num_compiler_threads=num_compiler_threads)
        spec = self.decode.input_specs["past_key_values"]
        self.prefill: CompiledFunction = context.compile(
            llm_forward(model, cache, "prefill"), first, storage.path(root / "prefill"),
            io_spec_constraints={"next_past_key_values": spec},
            num_compiler_threads=num_compiler_threads)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 max_new_tokens: int) -> torch.Tensor:
        """Greedy ids ``[batch, max_new_tokens]`` after the left-padded prompts.

        The prefill runs from host tensors; each decode step loads its token, positions and
        mask into input proxies and takes the cache from the step before (a relocation).
        """
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, not {max_new_tokens!r}")
        steps = _Steps(self.model, self.cache, self.cache_length, input_ids, attention_mask)
        out = self.prefill({**steps.first, "past_key_values": steps.empty})
        proxies = self.decode.allocate_input_proxy()
        proxies.pop("past_key_values").free()  # the cache comes from the step before
        tokens = []
        for index in range(max_new_tokens):
            token = out["next_token"].cpu()
            tokens.append(token)
            if index == max_new_tokens - 1:
                break
            for name, value in steps.next_inputs(token).items():
                proxies[name].load_from(value)
            out = self.decode({**proxies, "past_key_values": out["next_past_key_values"]})
        return torch.cat(tokens, 1)
