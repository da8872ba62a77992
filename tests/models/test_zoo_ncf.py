"""Neural collaborative filtering (user and item embeddings, an MLP, ``BCEWithLogitsLoss``,
Adam, an L1 penalty on the embeddings: ``abs``'s backward is ``sgn``) trained compiled against
eager, and its scores compiled for inference.

Tolerance (float32): losses ``rtol=1e-5, atol=1e-6``; parameters after 5 Adam steps
``rtol=1e-4, atol=1e-5``: the device sums the embedding gradients and the MLP's matmuls in its
own order (an ulp or so per op), and Adam divides by ``sqrt(v) + eps``, which turns an ulp of a
small second moment into a larger relative change of the step.
"""

from __future__ import annotations

import torch
from mlsdk import MNCoreAdam, storage
from torch import nn
from zoo_steps import assert_parameters_close, train_side_by_side

USERS, ITEMS, WIDTH, BATCH = 12, 20, 8, 16


class NCF(nn.Module):
    """Scores a (user, item) pair: the two embeddings joined, then a two-layer MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.users = nn.Embedding(USERS, WIDTH)
        self.items = nn.Embedding(ITEMS, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(2 * WIDTH, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([self.users(user), self.items(item)], dim=-1)
        return self.mlp(joined).squeeze(-1)


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"user": torch.randint(0, USERS, (BATCH,), generator=g),
            "item": torch.randint(0, ITEMS, (BATCH,), generator=g),
            "clicked": (torch.rand(BATCH, generator=g) > 0.5).float()}


_BCE = nn.BCEWithLogitsLoss()


def _loss(model: nn.Module, d: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(d["user"], d["item"])
    penalty = model.users.weight.abs().mean() + model.items.weight.abs().mean()
    return _BCE(logits, d["clicked"]) + 1e-2 * penalty


def test_ncf_training_step_matches_eager(context, tmp_path, seed):
    torch.manual_seed(seed)
    model = NCF()
    batches = [_batch(seed + i) for i in range(5)]
    losses, reference = train_side_by_side(context, model, _loss, batches, tmp_path / "ncf",
                                           MNCoreAdam, lr=1e-2)
    for step, (got, want) in enumerate(losses):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=f"step {step}")
    assert losses[-1][1] != losses[0][1]  # the parameters moved
    assert_parameters_close(model, reference, rtol=1e-4, atol=1e-5)


def test_ncf_scores_match_eager(context, tmp_path, seed):
    torch.manual_seed(seed)
    model = NCF().eval()
    context.registry.register("model", model)
    batch = _batch(seed)
    score = context.compile(lambda d: {"p": torch.sigmoid(model(d["user"], d["item"]))},
                            {k: batch[k] for k in ("user", "item")},
                            storage.path(tmp_path / "score"))
    other = _batch(seed + 1)
    got = score({k: other[k] for k in ("user", "item")})["p"].cpu()
    with torch.no_grad():
        torch.testing.assert_close(got, torch.sigmoid(model(other["user"], other["item"])),
                                   rtol=1e-5, atol=1e-6)
