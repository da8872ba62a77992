"""nn.Linear inference in mixed precision: float16 matmul operands, float32 accumulation.

Compiles ``nn.Linear(512, 256)`` with ``options={"float_dtype": "mixed"}``, runs it on a batch,
and compares the result with torch twice (docs/precision.md):

- with torch on operands rounded to float16 (what the matrix unit reads): equal to float32
  rounding;
- with torch in float32: within ``(2**-10 + (K + 1) * 2**-23) * (|x| @ |W|^T) + 1e-6`` per
  element, K the inner size.

It also shows that the weight is held on the device in float16 (half the DRAM of float32).

    python3 examples/linear_mixed.py [DEVICE]      # DEVICE defaults to mncore2:auto
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from torch import nn


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    torch.manual_seed(0)
    model = nn.Linear(512, 256).eval()
    x = torch.randn(64, 512)

    def infer(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"y": model(inputs["x"])}

    context = Context(MNDevice(device))
    codegen = storage.path(Path(tempfile.mkdtemp(prefix="linear_mixed_")) / "infer")
    compiled = context.compile(infer, {"x": x}, codegen, options={"float_dtype": "mixed"})
    y = compiled({"x": x})["y"].cpu()

    with torch.no_grad():
        exact = model(x)
        half = torch.float16
        operands_rounded = x.to(half).float() @ model.weight.to(half).float().T + model.bias
        k = x.shape[-1]
        bound = (2**-10 + (k + 1) * 2**-23) * (x.abs() @ model.weight.abs().T) + 1e-6
    error = (y - exact).abs()
    torch.testing.assert_close(y, operands_rounded, rtol=1e-6, atol=1e-6)
    if not bool((error <= bound).all()):
        raise SystemExit(f"error beyond the documented bound: max {error.max().item():.3g}")

    weight = compiled.program.graph.constants["model.weight"]
    print(f"nn.Linear(512, 256) on {device}, float_dtype='mixed'")
    print(f"  weight on the device: {str(weight.dtype).removeprefix('torch.')}, "
          f"{weight.numel() * weight.element_size()} bytes "
          f"(float32 would take {weight.numel() * 4})")
    print(f"  vs torch on float16-rounded operands: max |diff| "
          f"{(y - operands_rounded).abs().max().item():.3g}")
    print(f"  vs torch float32: max |diff| {error.max().item():.3g}, "
          f"at most {(error / bound).max().item():.2f} of the documented bound")
    context.close()
    print("linear_mixed: mixed precision matches torch")


if __name__ == "__main__":
    main()
