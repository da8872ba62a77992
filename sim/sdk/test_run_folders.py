"""Run folders of the Icarus backend: private, without the session's secret, and no simulator
left running after the runtime is killed (issue 38, run folders after ``kill -9``)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.device.rtl import runfolder
from mlsdk.device.rtl.endpoint import TOKEN_ENV
from mlsdk.testing.flows import require_device


def triple(inputs):
    return {"y": inputs["x"] * 3}


def _runs() -> set[Path]:
    """This process's run folders (``<sim>-<pid>-...``): other test workers share the folder."""
    folder = runfolder.COSIM_ROOT / "runs"
    mine = f"-{os.getpid()}-"
    return {p for p in folder.iterdir() if mine in p.name} if folder.is_dir() else set()


def _holds(folder: Path, secret: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_a_kept_run_folder_is_private_and_holds_no_secret(tmp_path, monkeypatch):
    require_device("mncore2:icarus")
    tokens = []
    real = subprocess.Popen

    def spy(*args, **kwargs):
        env = kwargs.get("env") or {}
        if TOKEN_ENV in env:
            tokens.append(env[TOKEN_ENV])
        return real(*args, **kwargs)

    monkeypatch.setenv(runfolder.KEEP_RUNS_ENV, "1")
    monkeypatch.setattr(subprocess, "Popen", spy)
    before = _runs()
    with Context(MNDevice("mncore2:icarus")) as context:
        fn = context.compile(triple, {"x": torch.ones(8)}, storage.path(tmp_path / "t"))
        assert fn({"x": torch.ones(8)})["y"].cpu().tolist() == [3.0] * 8
    kept = _runs() - before
    assert tokens and len(kept) == 1
    (folder,) = kept
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert _holds(folder, tokens[0].encode()) == []
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_kill_9_of_the_runtime_leaves_no_simulator_running(tmp_path):
    require_device("mncore2:icarus")
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time, torch
        from mlsdk import Context, MNDevice, storage
        real = subprocess.Popen
        def spy(*args, **kwargs):
            proc = real(*args, **kwargs)
            print("sim", proc.pid, flush=True)
            return proc
        subprocess.Popen = spy
        context = Context(MNDevice("mncore2:icarus"))
        fn = context.compile(lambda i: {{"y": i["x"] * 3}}, {{"x": torch.ones(8)}},
                             storage.path({str(tmp_path / 'k')!r}))
        fn({{"x": torch.ones(8)}})
        print("ready", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    pids = []
    try:
        deadline = time.monotonic() + 300
        for line in child.stdout:
            if line.startswith("sim "):
                pids.append(int(line.split()[1]))
            if line.startswith("ready") or time.monotonic() > deadline:
                break
        assert pids, "the child started no simulator"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        gone = time.monotonic() + 30
        while time.monotonic() < gone and any(_alive(p) for p in pids):
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), f"simulator(s) {pids} outlived the runtime"
    finally:
        if child.poll() is None:
            child.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False
