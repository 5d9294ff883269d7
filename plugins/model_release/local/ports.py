"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that is free at the moment of the call.

    The port is found by binding to port 0 and closing the socket again, so another process may
    still take it before the caller binds it; callers that start servers should retry on a bind
    failure.

    Args:
        host: the interface address to probe, loopback by default.

    Returns:
        A port number between 1024 and 65535.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
