"""ruff and mypy are clean, run with the suite so CI checks them on every submission."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mncore_hdl.paths import repo_root

ROOT = repo_root()


def _tool(name: str) -> str:
    tool = shutil.which(name, path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip(f"{name} is not installed (the project's dev extra installs it)")
    return tool


def test_ruff_is_clean():
    result = subprocess.run([_tool("ruff"), "check", ".", "--no-cache"], cwd=ROOT, text=True,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean():
    result = subprocess.run([_tool("mypy")], cwd=ROOT, text=True,
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
