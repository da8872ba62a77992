"""The application examples, unmodified, on the RTL memory system (``$SIM``: Icarus by default,
Verilator with ``SIM=verilator``): every feature reaches the device through the same command
stream, so each program must end as it does on the functional model."""

from __future__ import annotations

import pytest
from mlsdk.testing.examples import run_example
from mncore_hdl.testing.runner import require_simulator, simulator

#: Example -> the last line it prints when it succeeds.
EXAMPLES = {
    "preallocated_inputs.py": "preallocated inputs succeeded",
    "registered_params.py": "registered_params: OK",
    "pytree_signatures.py": "pytree signatures succeeded",
    "int_tensors.py": "int tensors: accuracy and loss match torch",
    "trace_add.py": "trace_add succeeded",
    "compile_cache.py": "compile_cache: success",
    "load_codegen_dir.py": "load_codegen_dir: success",
    "linear_mixed.py": "linear_mixed: mixed precision matches torch",
    "option_json.py": "option_json: options from the file applied, dict keys override them",
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_runs_on_the_rtl(tmp_path, example):
    require_simulator()
    device = f"mncore2:{simulator()}"
    run = run_example(example, device, cwd=tmp_path, env={"TMPDIR": str(tmp_path)},
                      timeout=900)
    lines = run.stdout.splitlines()
    assert lines[-1] == EXAMPLES[example], run.stdout
