"""The simulator's end of the runtime connection (see :mod:`mlsdk.device.rtl.endpoint`)."""

from __future__ import annotations

import os
import socket

from mlsdk.settings import SDK

__all__ = ["connect_to_runtime", "SOCKET_ENV", "TOKEN_ENV"]

#: Environment variables that carry the socket's path and the session's secret.
SOCKET_ENV = SDK["MNCORE_COSIM_SOCKET"].name
TOKEN_ENV = SDK["MNCORE_COSIM_TOKEN"].name


def connect_to_runtime(timeout: float = 30.0) -> socket.socket:
    """The simulator's end: connect to the runtime's socket and present the secret.

    Both come from the environment (:data:`SOCKET_ENV`, :data:`TOKEN_ENV`), which this removes
    from ``os.environ`` so that nothing the simulator starts inherits the secret.
    """
    path, token = os.environ.pop(SOCKET_ENV), os.environ.pop(TOKEN_ENV)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    sock.sendall(token.encode() + b"\n")
    sock.settimeout(None)
    return sock
