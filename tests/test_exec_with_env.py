"""exec_with_env.sh: it trusts only a complete, current environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "exec_with_env.sh"


def _check(venv: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MNCORE_VENV": str(venv)}
    return subprocess.run(["bash", str(SCRIPT), "--check"], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


def test_missing_environment_needs_a_build(tmp_path, bash):
    run = _check(tmp_path / "none")
    assert run.returncode == 1
    assert "no interpreter" in run.stdout


def test_half_made_environment_is_not_trusted(tmp_path, bash):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(shutil.which("python3"), venv / "bin" / "python")
    run = _check(venv)
    assert run.returncode == 1
    assert "half-made" in run.stdout


def test_stale_stamp_is_not_trusted(tmp_path, bash):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(shutil.which("python3"), venv / "bin" / "python")
    (venv / ".mncore-env-stamp").write_text("0" * 64 + "\n")
    run = _check(venv)
    assert run.returncode == 1
    assert "changed since it was built" in run.stdout


def test_the_environment_running_these_tests_is_healthy(bash):
    venv = ROOT / ".venv"
    if not (venv / ".mncore-env-stamp").is_file():
        pytest.skip("tests are not running inside exec_with_env.sh's .venv")
    run = _check(venv)
    assert run.returncode == 0, run.stdout
