"""A function with its gradients, for the op tests that check backward ops against eager: the
compiler's capture tests (``tests/compiler``) and the device sweeps (``tests/models``) build the
same function, so ``torch.autograd.grad`` inside it captures the backward ops too."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["with_grads"]

TensorDict = dict[str, torch.Tensor]


def with_grads(forward: Callable[[TensorDict], torch.Tensor]) -> Callable[[TensorDict], TensorDict]:
    """Wrap ``forward(d) -> y`` as ``d -> {"y": y, "d<x>": d(sum(y * r))/d<x>, ...}``.

    Parameters
    ----------
    forward
        The function under test, from a dict of named tensors to one tensor.

    Returns
    -------
    Callable
        A function of the same dict, which must also hold ``"r"`` (the cotangent, shaped like
        ``y``). Every other floating-point entry is a leaf the gradient is taken for; the
        others (indices, masks) are passed through as they are.
    """

    def fn(d: TensorDict) -> TensorDict:
        leaves = {k: v.detach().requires_grad_(True) for k, v in d.items()
                  if k != "r" and v.is_floating_point()}
        y = forward({**d, **leaves})
        grads = torch.autograd.grad((y * d["r"]).sum(), list(leaves.values()))
        return {"y": y, **{f"d{k}": g for k, g in zip(leaves, grads, strict=True)}}

    return fn
