"""What ships runs apart from the checkout: the kit built as a wheel, installed in a fresh
virtual environment (the shared environment's third-party packages, not the editable install),
runs the sweep CLI and the seed program on ``mncore2:icarus`` from a folder outside the checkout.

The venv reaches the shared site-packages through a plain path line in a ``.pth`` file, so the
shared environment's own ``.pth`` files (the editable install's source folders among them) are
not read: ``mlsdk``, ``mncore_compiler`` and ``mncore_hdl`` come from the wheel alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from mncore_hdl.paths import BUILD_ROOT, repo_root
from mncore_hdl.testing.runner import require_icarus

ROOT = repo_root()
#: Two Icarus points of the memory controller's throughput bench, a few seconds each.
TINY_SWEEP = {"name": "wheel_tiny", "backend": "icarus", "grid": {"pattern": ["read", "random"]},
              "fixed": {"sim_window_lw": 65536, "lw": 512, "ports": 1},
              "figures": ["efficiency", "cycles"]}


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout[-3000:]}" \
                                f"\n{run.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with the kit's wheel installed: its python and the environment to run it
    in (no ``PYTHONPATH``, so nothing of the checkout is importable)."""
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling (test extra)")
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "--disable-pip-version-check", "-q", "-w", str(tmp / "dist"), str(ROOT)])
    (wheel,) = (tmp / "dist").glob("mncore_cosim-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; "
                      "print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "shared-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
          "--disable-pip-version-check", "-q", str(wheel)], env=env, cwd=tmp)
    return python, env


def test_the_packages_come_from_the_wheel(installed, tmp_path):
    python, env = installed
    run = _run([str(python), "-c", "import json, mlsdk, mncore_compiler, mncore_hdl.paths as p; "
                "print(json.dumps([p.CHECKOUT is None, mlsdk.__file__, "
                "mncore_compiler.__file__, p.__file__]))"], env=env, cwd=tmp_path)
    no_checkout, *files = json.loads(run.stdout)
    venv = python.parent.parent
    assert no_checkout, "the installed mncore_hdl found a checkout"
    assert all(Path(f).is_relative_to(venv) for f in files), files


def test_the_sweep_cli_runs_icarus_points_from_the_wheel(installed, tmp_path):
    require_icarus()
    python, env = installed
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TINY_SWEEP))
    run = _run([str(python), "-m", "mncore_hdl.sweep", str(spec), "--no-progress"],
               env={**env, "MNCORE_BUILD_DIR": str(tmp_path / "build")}, cwd=tmp_path)
    assert "2 points: 2 run (this process)" in run.stdout and "; 0 failed;" in run.stdout
    assert (tmp_path / "build" / "sweeps" / "wheel_tiny" / "results.jsonl").is_file()


def test_the_seed_program_runs_on_icarus_from_the_wheel(installed, tmp_path):
    require_icarus()
    python, env = installed
    shutil.copy(ROOT / "examples" / "io_spec_constraints.py", tmp_path)
    # The checkout's build folder: the co-simulation top is built there by the other RTL
    # tests (by content, so the wheel's identical sources find it) and not again here.
    run = _run([str(python), "io_spec_constraints.py", "--device", "mncore2:icarus",
                "--no-compare"], env={**env, "MNCORE_BUILD_DIR": str(BUILD_ROOT)},
               cwd=tmp_path)
    assert "1 relocation(s), 0 conversion(s)" in run.stdout
    assert "producer -> consumer direct-use succeeded" in run.stdout
