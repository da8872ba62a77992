"""Compile a function in one process and run it in another, from its codegen directory alone.

This process compiles ``x * 2 + y`` into a codegen directory, then starts a second Python
process (this same file with ``--load``) that calls ``Context.load_codegen_dir`` on that
directory, checks the function's ``input_specs`` / ``output_specs`` against the ones the
compiling process saw, runs it and checks the result.

    python examples/load_codegen_dir.py [device]
    python examples/load_codegen_dir.py [device] --load DIR   # the second process
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

import torch
from mlsdk import Context, MNDevice, storage


def scale_add(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"out": inputs["x"] * 2 + inputs["y"]}


def specs_of(compiled) -> dict[str, dict]:
    return {"inputs": {n: s.to_dict() for n, s in compiled.input_specs.items()},
            "outputs": {n: s.to_dict() for n, s in compiled.output_specs.items()}}


def compile_then_reload(device: str) -> None:
    outdir = storage.path(tempfile.mkdtemp(prefix="mlsdk_load_codegen_dir_"))
    context = Context(MNDevice(device))
    sample = {"x": torch.randn(16, 32), "y": torch.randn(16, 32)}
    compiled = context.compile(scale_add, sample, outdir / "scale_add",
                               options={"float_dtype": "float"})
    (outdir / "specs.json").path.write_text(json.dumps(specs_of(compiled)))
    print(f"compiled into {outdir / 'scale_add'}")
    child = subprocess.run([sys.executable, __file__, device, "--load", str(outdir)],
                           capture_output=True, text=True)
    print(child.stdout, end="")
    if child.returncode != 0:
        sys.exit(f"the loading process failed:\n{child.stderr}")
    print("load_codegen_dir: success")


def load_and_run(device: str, directory: str) -> None:
    outdir = storage.path(directory)
    context = Context(MNDevice(device))
    compiled = context.load_codegen_dir(outdir / "scale_add")
    expected = json.loads((outdir / "specs.json").path.read_text())
    assert specs_of(compiled) == expected, (specs_of(compiled), expected)
    x, y = torch.randn(16, 32), torch.randn(16, 32)
    result = compiled({"x": x, "y": y})["out"].cpu()
    assert torch.allclose(result, x * 2 + y)
    print(f"loaded in process 2: {compiled}")
    print("  same input_specs and output_specs as when compiled; result checked")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("device", nargs="?", default="mncore2:auto")
    parser.add_argument("--load", metavar="DIR", help="run as the second, loading process")
    args = parser.parse_args()
    if args.load:
        load_and_run(args.device, args.load)
    else:
        compile_then_reload(args.device)


if __name__ == "__main__":
    main()
