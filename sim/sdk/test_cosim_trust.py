"""The simulator connection and waves of the cocotb backends, on the real simulators.

An intruder connects to the session's socket after it is bound and before the simulator
starts: it receives nothing, and the session's results are right. A session writing
waves under a file-size limit (``RLIMIT_FSIZE``, set in a child process and inherited by the
simulator) reports the cut wave file by name at close and writes no ``.gtkw`` for it. Before,
the runtime accepted the first connection on a localhost port as the simulator, and a cut VCD
got a save file and no word.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.device.rtl import builds, process, runfolder
from mlsdk.device.rtl.endpoint import SOCKET_ENV
from mlsdk.device.rtl.verilator import build_verilator
from mlsdk.testing.flows import require_device
from mncore_hdl.arch import MNCORE2_SIM

DEVICES = ["mncore2:icarus", "mncore2:verilator"]


def triple(inputs):
    return {"y": inputs["x"] * 3}


class Intruder:
    """Connects to the session's socket after it is bound and before the simulator starts.

    It wraps ``subprocess.Popen``: when the runtime launches a simulator (an environment naming
    the socket), the intruder connects first and sends a forged ready line, so its connection is
    the first in the listen queue on any machine load; then the real simulator starts.
    """

    def __init__(self, real):
        self.real, self.socks = real, []

    def __call__(self, *args, **kwargs):
        path = (kwargs.get("env") or {}).get(SOCKET_ENV)
        if path is not None and not self.socks:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            sock.sendall(b'{"ready": true, "seq": 0}\n')
            self.socks.append(sock)
        return self.real(*args, **kwargs)

    def answers(self) -> list[bytes]:
        """What each intruding connection received before it was closed."""
        got = []
        for sock in self.socks:
            sock.settimeout(10.0)
            try:
                got.append(sock.recv(1 << 16))
            except ConnectionResetError:  # closed with the intruder's line unread
                got.append(b"")
            except OSError as exc:
                got.append(repr(exc).encode())
            finally:
                sock.close()
        return got


@pytest.mark.parametrize("device", DEVICES)
def test_an_intruder_on_the_socket_gets_nothing(device, tmp_path, monkeypatch):
    require_device(device)
    runs = runfolder.COSIM_ROOT / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    mine = f"*-{os.getpid()}-*"  # pytest -n: other workers' sessions come and go
    before = set(runs.glob(mine))
    intruder = Intruder(subprocess.Popen)
    monkeypatch.setattr(process.subprocess, "Popen", intruder)
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(3))
    with Context(MNDevice(device)) as ctx:
        f = ctx.compile(triple, {"x": x}, storage.path(tmp_path / "f"))
        assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
    monkeypatch.undo()
    assert intruder.answers() == [b""], "the intruder should be closed unanswered"
    assert set(runs.glob(mine)) == before  # the session's run folder is gone


CHILD = textwrap.dedent("""
    import resource, sys, torch
    from mlsdk import Context, MNDevice, storage
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    x = torch.arange(64.0).reshape(8, 8)
    ctx = Context(MNDevice(sys.argv[1] + "?waves=" + sys.argv[2]))
    try:  # Icarus writes on past the limit; Verilator's model is killed by SIGXFSZ
        f = ctx.compile(lambda i: {"y": i["x"] * 3}, {"x": x}, storage.path(sys.argv[2] + "/f"))
        assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
    except Exception as exc:
        print("call:", type(exc).__name__, exc)
    try:
        ctx.close()
    except Exception as exc:
        print("close:", type(exc).__name__, exc)
""")


@pytest.mark.parametrize("device", DEVICES)
def test_waves_under_a_file_size_limit_are_reported(device, tmp_path):
    require_device(device)
    # The model that writes waves is built here, before the limit: a cold build under it would
    # fail at its first large object file, before any wave is written. On Verilator the wave
    # file is the default FST, whose model the rtl tier builds anyway (test_relocation,
    # test_waves): a VCD would be a third model to build for this test alone. Icarus writes
    # VCD, which grows with every change, from the same build.
    if device == "mncore2:verilator":
        build_verilator(MNCORE2_SIM, trace="fst")
        kind = "fst"
    else:
        builds.build_icarus(MNCORE2_SIM)
        kind = "vcd"
    limit = 100_000  # the waves outgrow it (a VCD's header alone); the tensors and logs do not
    out = subprocess.run([sys.executable, "-c", CHILD, device, str(tmp_path), str(limit)],
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "MNCORE_WAVES_FORMAT": kind})
    assert out.returncode == 0, out.stderr[-3000:]
    waves = list(tmp_path.glob(f"*.{kind}"))
    assert len(waves) == 1 and waves[0].stat().st_size == limit
    assert f"close: DeviceError The waveform file {waves[0]} is incomplete" in out.stdout, \
        out.stdout
    if "call:" in out.stdout:  # the simulator died at the limit: the error says why
        assert f"killed by SIGXFSZ (a file it wrote, such as its waves {waves[0]}," in out.stdout
        for kept in set(re.findall(r"log (\S+)/simulator\.log", out.stdout)):
            shutil.rmtree(kept)  # kept for debugging, as a failed session's is
    assert not list(tmp_path.glob("*.gtkw"))
