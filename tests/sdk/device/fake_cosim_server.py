"""A stand-in for the cocotb server, for ``tests/sdk/device/test_cosim_protocol.py`` (a script).

It speaks the session's protocol (one JSON line per request and per answer, progress lines in
between) without a simulator: ``{"op": "echo", "value": v, "delay": s}`` answers ``{"value":
v}`` after ``s`` seconds (sending progress lines meanwhile). ``$FAKE_COSIM_MODE`` makes it
misbehave: ``noseq`` answers without ``seq`` (a server from before sequence numbers),
``future`` answers with a seq one ahead, ``twice`` answers every request twice;
``hijack-stranger`` and ``hijack-group`` first start an intruder (:func:`intrude`), outside
the simulator's process group or inside it, without the session's secret, and connect only
once it has. ``{"op": "echo", "raw": text}`` answers with the line ``text`` (``SEQ`` replaced by the
request's seq), whatever the op.
"""

import json
import os
import socket
import subprocess
import sys
import time

from mlsdk.device.rtl.simulator.connect import SOCKET_ENV, TOKEN_ENV, connect_to_runtime


def intrude(report: str) -> int:
    """Connect to the session's socket, pose as the simulator and write what came back."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ[SOCKET_ENV])
    with open(report + ".tmp", "w") as f:
        json.dump({"connected": True}, f)
    os.replace(report + ".tmp", report)
    received = b""
    sock.settimeout(5.0)
    try:
        sock.sendall(b'{"ready": true, "seq": 0}\n')
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
            for line in chunk.splitlines():  # forge an answer to anything asked
                seq = json.loads(line).get("seq")
                sock.sendall(json.dumps({"value": 666, "seq": seq}).encode() + b"\n")
    except OSError:
        pass
    with open(report + ".tmp", "w") as f:
        json.dump({"connected": True, "done": True, "received": received.decode()}, f)
    os.replace(report + ".tmp", report)
    return 0


def start_intruder(mode: str) -> None:
    """Start the intruder and wait until it is connected (it is then first in the queue)."""
    report = os.environ["FAKE_COSIM_REPORT"]
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    subprocess.Popen([sys.executable, __file__, "--intrude", report], env=env,
                     start_new_session=mode == "hijack-stranger")
    end = time.monotonic() + 30
    while not os.path.exists(report) and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.2)


def main() -> int:
    mode = os.environ.get("FAKE_COSIM_MODE", "")
    if mode.startswith("hijack"):
        start_intruder(mode)
    sock = connect_to_runtime()
    stream = sock.makefile("rwb")

    def send(obj) -> None:
        stream.write(json.dumps(obj).encode() + b"\n")
        stream.flush()

    send({"ready": True, "seq": 0})
    while True:
        line = stream.readline()
        if not line:
            return 0
        msg = json.loads(line)
        seq = msg.get("seq")
        if msg.get("op") == "stop":
            send({"stopped": True, "seq": seq})
            return 0
        if "raw" in msg:
            stream.write(msg["raw"].replace("SEQ", str(seq)).encode() + b"\n")
            stream.flush()
            continue
        end = time.monotonic() + float(msg.get("delay", 0))
        while time.monotonic() < end:
            send({"progress": [0, 0], "seq": seq})
            time.sleep(min(0.05, max(end - time.monotonic(), 0)))
        answer = {"value": msg.get("value")}
        if mode == "future":
            answer["seq"] = seq + 1
        elif mode != "noseq":
            answer["seq"] = seq
        send(answer)
        if mode == "twice":
            send(answer)


if __name__ == "__main__":
    sys.exit(intrude(sys.argv[2]) if sys.argv[1:2] == ["--intrude"] else main())
