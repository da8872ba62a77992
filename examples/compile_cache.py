"""Add two tensors with a compile cache, on a modeled MN-Core 2 (MLSDK's minimal example).

Run it twice: the first run compiles the function and stores the program in the cache (a
miss); the second finds it there (a hit) and skips the compiler's pipeline. The report's
``compile`` record and the ``mlsdk.cache`` log say which.

    python examples/compile_cache.py [device] [work directory]

The device defaults to ``mncore2:auto``; the work directory (holding ``cache/`` and the
codegen directory ``add/``) defaults to ``mlsdk_compile_cache_example`` in the temp folder.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import torch
from mlsdk import CacheOptions, Context, MNDevice, storage


def add(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"out": inputs["x"] + inputs["y"]}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "mncore2:auto"
    default = Path(tempfile.gettempdir()) / "mlsdk_compile_cache_example"
    outdir = storage.path(sys.argv[2] if len(sys.argv) > 2 else default)
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("mlsdk.cache").setLevel(logging.INFO)

    context = Context(MNDevice(device))
    sample = {"x": torch.randn(4, 8), "y": torch.randn(4, 8)}
    compiled = context.compile(add, sample, outdir / "add", options={"float_dtype": "float"},
                               cache_options=CacheOptions(outdir / "cache"))
    print(f"compile cache: {compiled.cache_status}")

    x, y = torch.randn(4, 8), torch.randn(4, 8)
    result = compiled({"x": x, "y": y})["out"].cpu()
    assert torch.allclose(result, x + y), (result, x + y)
    print(context.report())
    print("compile_cache: success")


if __name__ == "__main__":
    main()
