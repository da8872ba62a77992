"""Whole programs: the seed's sample program, unmodified, and our example, as users run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mlsdk.testing.seeds import SHARED, SUCCESS, extract_sample_program, seed_documents
from mncore_hdl.paths import repo_root

ROOT = repo_root()


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("device", ["mncore2:auto", "pfvm:cpu"])
def test_seed_program_runs_unmodified(tmp_path, device):
    seeds = seed_documents()
    if not seeds:
        pytest.skip(f"no seed program found under {SHARED / 'seeds'} (set MNCORE_SHARED_DIR "
                    "to the folder holding seeds/)")
    program = tmp_path / "io_spec_constraints.py"
    program.write_text(extract_sample_program(seeds[0].read_text()))
    compile(program.read_text(), str(program), "exec")
    run = _run([str(program), "--device", device], tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == SUCCESS


def test_extract_sample_program_needs_a_listing():
    with pytest.raises(ValueError, match="no 'Listing' line"):
        extract_sample_program("just prose")
    assert extract_sample_program("a\nListing 8.9 x.py\n\nimport os\n") == "import os\n"


def test_example_shows_both_handoffs(tmp_path):
    run = _run([str(ROOT / "examples" / "io_spec_constraints.py"), "--device", "mncore2:auto"],
               tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert SUCCESS in lines
    assert any("1 relocation(s), 0 conversion(s), 0 converter bytes" in ln for ln in lines)
    assert any("1 conversion(s), 16384 converter bytes" in ln for ln in lines)
    assert any("is memcopyable: False" in ln for ln in lines)


def test_example_rejects_an_unknown_device(tmp_path):
    run = _run([str(ROOT / "examples" / "io_spec_constraints.py"), "--device", "nope"], tmp_path)
    assert run.returncode != 0
    assert "valid device strings are" in run.stderr
