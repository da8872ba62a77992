"""exec_with_env.sh: it trusts only a complete, current environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mncore_hdl.paths import repo_root

ROOT = repo_root()
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


def _healthy_fake_venv(tmp_path: Path) -> Path:
    """A venv that passes every health check: a stand-in interpreter and a current stamp."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    wanted = subprocess.run(
        ["bash", "-c", f'source <(sed -n "/^wanted_stamp()/,/^}}/p" {SCRIPT}); '
                       f'ROOT={ROOT}; TORCH_PIN=$(sed -n "s/^TORCH_PIN=\\"\\(.*\\)\\"/\\1/p" '
                       f'{SCRIPT}); ENV_RECIPE=$(sed -n "s/^ENV_RECIPE=//p" {SCRIPT}); '
                       "wanted_stamp"],
        capture_output=True, text=True, check=True).stdout
    (venv / ".mncore-env-stamp").write_text(wanted)
    return venv


def _path_without_iverilog(tmp_path: Path) -> str:
    """A PATH with the shell tools the script uses, a failing apt-get that logs its calls, and
    no iverilog."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("bash", "cat", "cut", "sha256sum", "flock", "id", "mkdir", "dirname", "date",
                 "true", "printf", "rm", "sed"):
        found = shutil.which(name)
        if found:
            os.symlink(found, tools / name)
    apt = tools / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$@" >>"{tmp_path}/apt.log"\nexit 100\n')
    apt.chmod(0o755)
    return str(tools)


def test_a_failed_iverilog_install_is_not_retried_on_every_call(tmp_path, bash):
    if os.geteuid() != 0:
        pytest.skip("the automatic apt-get install is only attempted as root")
    venv = _healthy_fake_venv(tmp_path)
    env = {"PATH": _path_without_iverilog(tmp_path), "MNCORE_VENV": str(venv),
           "HOME": str(tmp_path)}
    for _ in range(3):
        run = subprocess.run(["bash", str(SCRIPT), "true"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert "apt-get install -y iverilog" in run.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls == ["update -qq"], calls
    assert (venv / ".mncore-iverilog-apt-failed").is_file()


def test_the_build_lock_sits_beside_the_environment(tmp_path, bash):
    venv = tmp_path / "elsewhere" / "venv"
    # A builder that fails at once: the script takes its lock, then stops at `python -m venv`.
    env = {**os.environ, "MNCORE_VENV": str(venv), "PYTHON": "false"}
    run = subprocess.run(["bash", str(SCRIPT), "true"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    assert (tmp_path / "elsewhere" / "venv.lock").is_file()
