"""Property tests: random broadcast shapes and data-movement chains, captured vs torch eager."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mncore_compiler.capture import capture
from mncore_compiler.interpreter import interpret
from mncore_compiler.passes import Compilation, run_pipeline

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def _randn(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: each dim of the shorter one is 1 or the longer one's size."""
    big = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=4)))
    keep = draw(st.integers(0, len(big)))
    small = tuple(d if draw(st.booleans()) else 1 for d in big[len(big) - keep :])
    return (big, small) if draw(st.booleans()) else (small, big)


@SETTINGS
@given(
    shapes=broadcast_pair(),
    op=st.sampled_from(["add", "sub", "mul", "div"]),
    seed=st.integers(0, 2**16),
)
def test_binary_broadcast_property(
    shapes: tuple[tuple[int, ...], tuple[int, ...]], op: str, seed: int
) -> None:
    fn = getattr(torch, op)
    inputs = {"a": _randn(seed, shapes[0]), "b": _randn(seed + 1, shapes[1]).abs() + 0.5}
    graph = run_pipeline(Compilation(capture(lambda d: {"c": fn(d["a"], d["b"])}, inputs))).graph
    expected = fn(inputs["a"], inputs["b"])
    got = interpret(graph, inputs)["c"]
    torch.testing.assert_close(got, expected, msg=lambda m: f"{op} {shapes} seed={seed}: {m}")


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_permute_reshape_reduce_property(shape: list[int], data: st.DataObject, seed: int) -> None:
    perm = data.draw(st.permutations(range(len(shape))))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())

    def fn(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        moved = d["x"].permute(*perm).contiguous()
        flat = moved.reshape(-1, moved.shape[-1])
        return {
            "flat": flat,
            "sum": moved.sum(dim=dim, keepdim=keepdim),
            "max": moved.amax(dim=dim, keepdim=keepdim),
            "soft": torch.softmax(moved, dim=dim),
        }

    inputs = {"x": _randn(seed, tuple(shape))}
    got = interpret(capture(fn, inputs), inputs)
    for name, value in fn(inputs).items():
        torch.testing.assert_close(
            got[name], value, msg=lambda m, n=name: f"{n} {shape} {perm} seed={seed}: {m}"
        )
