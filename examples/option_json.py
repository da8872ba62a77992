"""Compile options from a JSON file: ``options={"option_json": "options.json"}``.

Writes an options file (``{"float_dtype": "mixed", "strict": true}``), compiles a small MLP with
it, then compiles again with the file plus an explicit ``"float_dtype": "float32"``: a key given
in the dict overrides the file's (docs/precision.md, "Options from a JSON file").

    python3 examples/option_json.py [DEVICE]      # DEVICE defaults to mncore2:auto
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from torch import nn


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).eval()
    x = torch.randn(16, 128)

    def infer(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"logits": mlp(inputs["x"])}

    work = Path(tempfile.mkdtemp(prefix="option_json_"))
    option_file = work / "options.json"
    option_file.write_text(json.dumps({"float_dtype": "mixed", "strict": True}))

    context = Context(MNDevice(device))
    from_file = context.compile(infer, {"x": x}, storage.path(work / "from_file"),
                                options={"option_json": str(option_file)})
    overridden = context.compile(infer, {"x": x}, storage.path(work / "overridden"),
                                 options={"option_json": str(option_file),
                                          "float_dtype": "float32"})
    with torch.no_grad():
        expected = mlp(x)
    mixed = from_file({"x": x})["logits"].cpu()
    single = overridden({"x": x})["logits"].cpu()
    torch.testing.assert_close(mixed, expected, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(single, expected)

    print(f"on {device}, options file {option_file.name}: {option_file.read_text()}")
    print(f"  from the file:         {from_file.program.options}, max |diff| vs torch "
          f"{(mixed - expected).abs().max().item():.3g}")
    print(f"  file + dict override:  {overridden.program.options}, max |diff| vs torch "
          f"{(single - expected).abs().max().item():.3g}")
    context.close()
    print("option_json: options from the file applied, dict keys override them")


if __name__ == "__main__":
    main()
