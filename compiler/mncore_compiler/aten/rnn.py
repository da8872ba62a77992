"""Recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) as torch's own decompositions of
``aten.lstm.input`` / ``aten.gru.input`` define them: one matmul-and-gates cell per time step,
so that autograd differentiates the cells and the backward needs no op of its own.

On the CPU in float32 torch's LSTM decomposition calls ``aten.mkldnn_rnn_layer`` (oneDNN's
fused layer, whose backward reads an opaque workspace) whenever oneDNN is enabled; capture
traces with oneDNN disabled (:func:`rnn_decompositions`), so it takes the portable cell path.
The cells split their gates with ``unsafe_split`` / ``unsafe_chunk`` (captured as ``split``)
and a GRU's batch-first input is turned with ``transpose_`` (captured as a ``transpose``, see
``functionalize.functional_name``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .registry import decompose

__all__ = ["rnn_decompositions"]


decompose("unsafe_split.Tensor", "unsafe_split_with_sizes.default")


@contextlib.contextmanager
def rnn_decompositions() -> Iterator[None]:
    """Trace recurrent layers through their cell decomposition, not oneDNN's fused layer.

    ``torch._decomp``'s LSTM picks ``mkldnn_rnn_layer`` on the CPU when
    ``torch._C._get_mkldnn_enabled()``; with oneDNN off for the trace, it emits the cells.
    Only the trace is affected: the compiled program runs the IR's own references.
    """
    # Only the one flag: torch.backends.mkldnn.flags() would also reset the TF32 and
    # determinism settings.
    # (setattr: torch types the module attribute as its descriptor, not a bool.)
    was = bool(torch.backends.mkldnn.enabled)
    setattr(torch.backends.mkldnn, "enabled", False)  # noqa: B010
    try:
        yield
    finally:
        setattr(torch.backends.mkldnn, "enabled", was)  # noqa: B010
