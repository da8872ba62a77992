"""A function over tuples, NamedTuples, lists and dataclasses, compiled with compile_automap.

The compiled function is called with the same structures as the Python one and returns the
same structure, with a TensorProxy at each tensor leaf. A second compiled function then takes
part of that result as it is: the hand-off stays on the device.

    PYTHONPATH=sdk:compiler:hdl python examples/pytree_signatures.py [device]
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import torch
from mlsdk import (
    Context,
    MNDevice,
    TensorProxy,
    register_pytree_dataclass,
    register_pytree_namedtuple,
    storage,
)


@register_pytree_namedtuple
class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


@register_pytree_dataclass
@dataclasses.dataclass
class Affine:
    scale: torch.Tensor
    shift: torch.Tensor


def combine(pair: Pair, terms: list[torch.Tensor], diff: tuple[torch.Tensor, torch.Tensor],
            affine: Affine, *, gain: float = 2.0):
    """Sum a Pair and a list, subtract a tuple, apply an Affine; return a nested structure."""
    total = pair.left + pair.right
    for term in terms:
        total = total + term
    return {"total": total * gain,
            "affine": Affine(scale=total * affine.scale, shift=diff[0] - diff[1] + affine.shift),
            "pair": Pair(pair.right, pair.left)}


def apply(affine: Affine, x: torch.Tensor) -> torch.Tensor:
    return x * affine.scale + affine.shift


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    context = Context(MNDevice(device))
    work = Path(tempfile.mkdtemp(prefix="mncore_pytree_"))
    torch.manual_seed(0)

    def t() -> torch.Tensor:
        return torch.randn(16, 32)

    args = (Pair(t(), t()), [t(), t(), t()], (t(), t()), Affine(t(), t()))
    kwargs = {"gain": 3.0}
    compiled = context.compile_automap(combine, args, kwargs, storage.path(work / "combine"),
                                       options={"float_dtype": "float"})
    print(compiled)
    print("inputs: ", ", ".join(compiled.input_specs))
    print("outputs:", ", ".join(compiled.output_specs))

    result = compiled(*args, **kwargs)
    expected = combine(*args, **kwargs)
    assert isinstance(result["affine"], Affine) and isinstance(result["pair"], Pair)
    assert isinstance(result["total"], TensorProxy)
    for got, want in ((result["total"], expected["total"]),
                      (result["affine"].scale, expected["affine"].scale),
                      (result["affine"].shift, expected["affine"].shift),
                      (result["pair"].left, expected["pair"].left)):
        assert torch.allclose(got.cpu(), want, atol=1e-5)

    # The Affine the device returned goes straight into another compiled function.
    follow = context.compile_automap(apply, (expected["affine"], t()), None,
                                     storage.path(work / "apply"))
    x = t()
    chained = follow(result["affine"], x)
    assert torch.allclose(chained.cpu(), apply(expected["affine"], x), atol=1e-4)

    print(context.report())
    print("pytree signatures succeeded")


if __name__ == "__main__":
    main()
