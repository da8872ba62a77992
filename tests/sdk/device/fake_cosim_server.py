"""A stand-in for the cocotb server, for ``tests/sdk/device/test_cosim_protocol.py`` (a script).

It speaks the session's protocol (one JSON line per request and per answer, progress lines in
between) without a simulator: ``{"op": "echo", "value": v, "delay": s}`` answers ``{"value":
v}`` after ``s`` seconds (sending progress lines meanwhile). ``$FAKE_COSIM_MODE`` makes it
misbehave: ``noseq`` answers without ``seq`` (a server from before sequence numbers),
``future`` answers with a seq one ahead, ``twice`` answers every request twice.
"""

import json
import os
import socket
import sys
import time


def main() -> int:
    mode = os.environ.get("FAKE_COSIM_MODE", "")
    sock = socket.create_connection(("127.0.0.1", int(os.environ["MNCORE_COSIM_PORT"])))
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
    sys.exit(main())
