"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

#: the lowest port :func:`free_port` picks (it picks below the kernel's ephemeral range)
FLOOR = 20000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low(range_file: Path = _RANGE_FILE) -> int | None:
    """The first port of the kernel's ephemeral range (source ports of outgoing connections), or None."""
    try:
        return int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", *, range_file: Path = _RANGE_FILE) -> int:
    """Return a TCP port on ``host`` that is free at the moment of the call.

    The port is picked at random below the kernel's ephemeral range (``ip_local_port_range``,
    32768-60999 on Linux by default) and checked by binding it. A port from the ephemeral range
    (what binding port 0 gives) can be taken as the source port of any outgoing connection on the
    machine before the caller's server binds it; with four test workers and a stack's dozen
    services making connections, that happened (an Airflow api-server refused with "address already
    in use"). Below the range only another server can take it. Where the range cannot be read or
    leaves no room above ``FLOOR``, the port comes from binding port 0. Callers that start
    servers should still retry on a bind failure.

    Args:
        host: the interface address to probe, loopback by default.
        range_file: where the kernel's ephemeral range is read from.

    Returns:
        A port number between 1024 and 65535.
    """
    low = ephemeral_low(range_file)
    if low is not None and low - FLOOR >= 1000:
        for _ in range(64):
            port = FLOOR + secrets.randbelow(low - FLOOR)
            if _bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
