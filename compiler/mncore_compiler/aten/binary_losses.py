"""Binary cross-entropy, forward and backward, on probabilities and on logits: through torch's
decompositions (into ``log``, ``log1p``-free arithmetic, ``sigmoid``, ``clamp``, means)."""

from __future__ import annotations

from .registry import decompose

__all__: list[str] = []


decompose("binary_cross_entropy.default", "binary_cross_entropy_backward.default",
          "binary_cross_entropy_with_logits.default", "log_sigmoid_forward.default",
          "log_sigmoid_backward.default")
