"""Helpers for language-model inference: the 4-D causal mask of a left-padded batch, KV caches
as one stacked tensor, and greedy generation with a compiled prefill and decode step."""
